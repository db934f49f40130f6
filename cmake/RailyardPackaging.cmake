# Debian packages: `cpack -G DEB --config <build>/CPackConfig.cmake` (run in any
# directory; -B DIR chooses where the .deb files go) builds one package per
# install component of cmake/RailyardInstall.cmake, all under /usr:
#
#   libnccl-net-railyard      the plugin (/usr/lib/libnccl-net-railyard.so, on the
#                             loader's default path, so NCCL_NET_PLUGIN=railyard
#                             finds it) and the configuration reference. Enough on
#                             its own to run NCCL jobs with Railyard.
#   libnccl-net-railyard-dev  <railyard/railyard.h>, railyard.pc, the CMake package;
#                             depends on the exact same libnccl-net-railyard.
#   railyard-tools            railyard-perf, railyard-info, railyardd (+ its systemd
#                             unit, installed but not enabled), railyard-tcp-pump,
#                             railyard-config-doc, railyard-plot; depends on the
#                             same libnccl-net-railyard (railyard-perf's default
#                             plugin).
#
# Shared-library dependencies (libibverbs1, libhwloc15, libstdc++6, libc6, ...) come
# from dpkg-shlibdeps on the packaged binaries (package dpkg-dev), so they are
# exactly what the binaries link. Binaries are stripped. tests/install/deb_test.sh
# builds the packages, checks their Depends against ldd of the extracted files and
# runs the extracted railyard-perf against the extracted plugin.

set(RAILYARD_DEB_MAINTAINER "Railyard maintainers <maintainers@railyard.invalid>" CACHE STRING
  "Maintainer field of the Debian packages")

set(CPACK_PACKAGE_NAME railyard)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Railyard")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "NCCL net plugin for small switchless RDMA clusters")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# With CPACK_SET_DESTDIR the install prefix is CPACK_INSTALL_PREFIX.
set(CPACK_INSTALL_PREFIX /usr)
# DESTDIR staging: install-time code (railyard.pc, railyardd.service) then sees
# the real prefix /usr, not the staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL plugin dev tools)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RAILYARD_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Inter-package Depends from the component DEPENDS below, with "(= version)".
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_PLUGIN_PACKAGE_NAME libnccl-net-railyard)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SECTION libs)
# The verbs transport needs a provider for the HCA (mlx5, rxe, ...) at run time;
# hwloc finds PCI devices (NIC/GPU locality) only with its plugins.
set(CPACK_DEBIAN_PLUGIN_PACKAGE_RECOMMENDS "ibverbs-providers, libhwloc-plugins")
# triggers: ldconfig after install/removal (the loader cache NCCL's dlopen uses);
# CPack's own postinst/postrm for a package with a shared library run ldconfig
# too, so it is refreshed either way.
set(CPACK_DEBIAN_PLUGIN_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/packaging/deb/libnccl-net-railyard/triggers")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libnccl-net-railyard-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME railyard-tools)
# railyard-plot is Python and plots with matplotlib; nothing else needs them.
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "python3, python3-matplotlib")
# postinst/postrm: systemctl daemon-reload only; the unit is never enabled.
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA
  "${PROJECT_SOURCE_DIR}/packaging/deb/railyard-tools/postinst;${PROJECT_SOURCE_DIR}/packaging/deb/railyard-tools/postrm")
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
cpack_add_component(plugin DISPLAY_NAME "NCCL net plugin"
  DESCRIPTION "libnccl-net-railyard.so, loaded by NCCL with NCCL_NET_PLUGIN=railyard")
cpack_add_component(dev DISPLAY_NAME "C API headers, pkg-config and CMake package" DEPENDS plugin)
cpack_add_component(tools DISPLAY_NAME "railyard-perf, railyardd and the other tools" DEPENDS plugin)
