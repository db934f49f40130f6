# What `cmake --install <build> [--prefix P]` puts where, by component (the
# Debian packages of cmake/RailyardPackaging.cmake are cut along them):
#
#   plugin  P/<libdir>/libnccl-net-railyard.so      NCCL dlopens it by name through
#           (libdir: lib, or lib/<multiarch> when   the loader's search path
#           P is /usr on Debian)                    (NCCL_NET_PLUGIN=railyard)
#           P/share/doc/railyard/configuration.md   every RAILYARD_* variable
#           P/share/doc/railyard/README.md
#   dev     P/include/railyard/railyard.h, version.h   the exported railyard_* C API
#           P/include/railyard/expert.hpp              its C++ wrapper (expert tier)
#           P/<libdir>/pkgconfig/railyard.pc           pkg-config --cflags --libs railyard
#           P/<libdir>/cmake/Railyard/                 find_package(Railyard) →
#                                                      Railyard::nccl-net-railyard
#   tools   P/bin/railyard-perf, railyard-info, railyardd, railyard-tcp-pump,
#           railyard-config-doc, railyard-plot, railyard-pack
#           P/lib/systemd/system/railyardd.service     installed, never enabled
#
# Nothing installed points back into the build tree: CMake drops the build RPATH
# on install and no INSTALL_RPATH is set (the plugin's dependencies are system
# libraries), and the plugin never reads files at run time. tests/install checks
# both (install.prefix, install.deb).
#
# The .pc file and the systemd unit carry absolute paths, so they are written at
# install time from the prefix actually used (cmake --install --prefix P, or
# /usr inside cpack, which installs with DESTDIR).

set(RAILYARD_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING
  "Where railyardd.service is installed: relative to the install prefix, or absolute")

# The targets a full install needs; `cmake --build build --target shipped`
# builds just those (tools/setup.sh does, before the main job).
set(RAILYARD_SHIPPED_TOOLS railyard-perf railyard-info railyardd railyard-tcp-pump railyard-config-doc railyard-pack)
add_custom_target(shipped)
add_dependencies(shipped nccl-net-railyard ${RAILYARD_SHIPPED_TOOLS})

# ---- plugin: the library NCCL loads, and the configuration reference -------------
install(TARGETS nccl-net-railyard EXPORT RailyardTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT plugin)
install(FILES ${PROJECT_SOURCE_DIR}/docs/configuration.md ${PROJECT_SOURCE_DIR}/README.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT plugin)

# ---- dev: header, pkg-config, CMake package ----------------------------------
install(FILES ${PROJECT_SOURCE_DIR}/include/railyard/railyard.h ${PROJECT_SOURCE_DIR}/include/railyard/expert.hpp
              ${PROJECT_BINARY_DIR}/include/railyard/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/railyard COMPONENT dev)

include(CMakePackageConfigHelpers)
set(RAILYARD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Railyard)
install(EXPORT RailyardTargets NAMESPACE Railyard:: DESTINATION ${RAILYARD_CMAKE_DIR}
  FILE RailyardTargets.cmake COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/RailyardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/RailyardConfig.cmake INSTALL_DESTINATION ${RAILYARD_CMAKE_DIR})
# The C API grows within a minor version; a new minor version may change it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/RailyardConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/RailyardConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/RailyardConfigVersion.cmake
  DESTINATION ${RAILYARD_CMAKE_DIR} COMPONENT dev)

# railyard.pc: written at install time with the real prefix (see the top).
install(CODE "
  set(RAILYARD_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${CMAKE_CURRENT_LIST_DIR}/railyard.pc.in\"
                 \"${PROJECT_BINARY_DIR}/cmake/install-time/railyard.pc\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
       TYPE FILE FILES \"${PROJECT_BINARY_DIR}/cmake/install-time/railyard.pc\")
" COMPONENT dev)

# ---- tools: programs, the plot command, the systemd unit ------------------------
install(TARGETS ${RAILYARD_SHIPPED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/plot/railyard_plot.py
  DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME railyard-plot COMPONENT tools)

if(IS_ABSOLUTE "${RAILYARD_SYSTEMD_UNITDIR}")
  set(_ry_unitdir "${RAILYARD_SYSTEMD_UNITDIR}")
else()
  set(_ry_unitdir "\${CMAKE_INSTALL_PREFIX}/${RAILYARD_SYSTEMD_UNITDIR}")
endif()
install(CODE "
  set(RAILYARDD_PATH \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/railyardd\")
  configure_file(\"${PROJECT_SOURCE_DIR}/tools/railyardd/railyardd.service.in\"
                 \"${PROJECT_BINARY_DIR}/cmake/install-time/railyardd.service\" @ONLY)
  file(INSTALL DESTINATION \"${_ry_unitdir}\"
       TYPE FILE FILES \"${PROJECT_BINARY_DIR}/cmake/install-time/railyardd.service\")
" COMPONENT tools)
unset(_ry_unitdir)
