// railyard_conformance_loader: finds ncclNetPlugin_v11 the way NCCL 2.28.9 does
// and checks that the table works. Exec'd by conformance_loading_test with
// LD_LIBRARY_PATH or LD_PRELOAD set, which the loader only reads at process start.
//
//   railyard_conformance_loader name <value>  NCCL_NET_PLUGIN=<value> (§1.2): dlopen(value),
//                                             then libnccl-net-<value>.so
//   railyard_conformance_loader path <file>   dlopen(file)
//   railyard_conformance_loader preload       dlsym(RTLD_DEFAULT, ...) (LD_PRELOAD'ed)
//
// Prints "key=value" lines (lib, name, init, ndev, dev0, devtype, finalize) and
// exits 0 when every step worked, 1 otherwise (with an "error=" line).
// Deliberately links nothing of Railyard: it reaches the plugin only by name.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "plugin/abi/net_v11.h"

namespace {

int Fail(const std::string& why) {
  std::printf("error=%s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

void Logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  std::printf("warn=");
  std::vprintf(fmt, ap);
  std::printf("\n");
  va_end(ap);
}

/// NCCL's openPluginLib for a net plugin value (nccl-net-abi.md §1.2).
void* OpenLikeNccl(const std::string& value) {
  void* h = dlopen(value.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) return h;
  std::printf("first_try=%s\n", dlerror());
  const bool isLibSo = value.rfind("lib", 0) == 0 && value.size() > 3 &&
                       value.compare(value.size() - 3, 3, ".so") == 0;
  if (value.find('/') != std::string::npos || isLibSo) return nullptr;
  const std::string lib = "libnccl-net-" + value + ".so";
  h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) std::printf("second_try=%s\n", dlerror());
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: railyard_conformance_loader name <v> | path <f> | preload");
  const std::string mode = argv[1];
  const ncclNet_v11_t* net = nullptr;
  if (mode == "name" || mode == "path") {
    if (argc < 3) return Fail("missing argument");
    void* h = mode == "name" ? OpenLikeNccl(argv[2]) : dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return Fail(std::string("could not load ") + argv[2]);
    net = static_cast<const ncclNet_v11_t*>(dlsym(h, "ncclNetPlugin_v11"));
  } else if (mode == "preload") {
    net = static_cast<const ncclNet_v11_t*>(dlsym(RTLD_DEFAULT, "ncclNetPlugin_v11"));
  } else {
    return Fail("unknown mode " + mode);
  }
  if (net == nullptr) return Fail("ncclNetPlugin_v11 not found");
  Dl_info info{};
  if (dladdr(net, &info) != 0 && info.dli_fname != nullptr) {
    char real[PATH_MAX];
    std::printf("lib=%s\n", realpath(info.dli_fname, real) ? real : info.dli_fname);
  }
  std::printf("name=%s\n", net->name ? net->name : "(null)");
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  const ncclResult_t init = net->init(&ctx, 7, &config, &Logger, nullptr);
  std::printf("init=%d\n", static_cast<int>(init));
  if (init != ncclSuccess) {
    net->finalize(ctx);  // NCCL finalizes after a failed init too
    return Fail("init failed");
  }
  int ndev = 0;
  const ncclResult_t devs = net->devices(&ndev);
  std::printf("ndev=%d\n", devs == ncclSuccess ? ndev : -1);
  if (devs != ncclSuccess || ndev < 1) return Fail("devices failed");
  ncclNetProperties_v11_t props;
  std::memset(&props, 0, sizeof props);
  if (net->getProperties(0, &props) != ncclSuccess) return Fail("getProperties(0) failed");
  std::printf("dev0=%s\n", props.name ? props.name : "(null)");
  std::printf("devtype=%d\n", static_cast<int>(props.netDeviceType));
  std::printf("finalize=%d\n", static_cast<int>(net->finalize(ctx)));
  std::fflush(stdout);
  return 0;
}
