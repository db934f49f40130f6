// railyard-pack: builds an expert store (storage/expert/manifest.h) from a safetensors
// checkpoint: a single file, or a directory sharded with model.safetensors.index.json
// or holding one model.safetensors.
//
//   railyard-pack CHECKPOINT OUT_DIR [--scheme auto|qwen-moe|mixtral] [--align BYTES]
//                 [--model-id ID] [--dry-run] [--progress|--no-progress] [--verify]
//
// Exit status: 0 written (or planned, with --dry-run); 1 the checkpoint or the output
// directory was refused (the message names the file and the fault; nothing else is
// printed: the plan only once the input and the output are known good) or writing
// failed; 2 bad arguments; 128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it
// (the partial directory removed).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "storage/expert/expert_error.h"
#include "tools/common/cli_parse.h"
#include "storage/expert/pack.h"
#include "storage/expert/store.h"

namespace {

/// Why `outDir` cannot become the store ("" when it can): it exists already, or its parent
/// is missing, not a directory or not writable. Checked before the plan is printed, so a
/// refused run prints nothing that reads as success (WriteStore checks again when it writes).
std::string OutputRefusal(const std::string& outDir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::symlink_status(outDir, ec).type() != fs::file_type::not_found) {
    return "output " + outDir + " already exists (railyard-pack writes a new store; remove it or name another)";
  }
  fs::path parent = fs::path(outDir).parent_path();
  if (parent.empty()) parent = ".";
  if (fs::exists(parent, ec) && !fs::is_directory(parent, ec)) {  // it said "does not exist" (new-user trial)
    return "output " + outDir + ": " + parent.string() + " is not a directory";
  }
  if (!fs::is_directory(parent, ec)) return "output " + outDir + ": its directory " + parent.string() + " does not exist";
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return "output " + outDir + ": its directory " + parent.string() + " is not writable: " + std::strerror(errno);
  }
  // access() answers yes for root where a directory still cannot be made (/proc, a file
  // system that refuses it): one is made and removed (new-user trial: the plan was
  // printed, then the run failed at its mkdir).
  const std::string probe = outDir + ".probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0700) != 0) {
    return "output " + outDir + ": a directory cannot be made in " + parent.string() + ": " + std::strerror(errno);
  }
  (void)::rmdir(probe.c_str());
  return "";
}

/// Set by SIGINT, SIGTERM or SIGHUP: ExecutePack stops before its next record and removes
/// its partial directory (new-user trial: an interrupted pack left hundreds of MB behind).
std::atomic<bool> g_cancel{false};
volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) {
  g_signal = sig;
  g_cancel.store(true);
}

/// Removes "<OUT>.partial-<host>-<pid>" directories (expert::PartialDirOf) beside OUT
/// that a run on this host left whose process is gone (a pack killed with SIGKILL, or a
/// crash), saying so on stderr. Another host's (a shared file system) are never touched.
void ReclaimStalePartials(const std::string& outDir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path out(outDir);
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const std::string mine = fs::path(railyard::expert::PartialDirOf(outDir)).filename().string();
  const std::string prefix = mine.substr(0, mine.rfind('-') + 1);  // "<OUT>.partial-<host>-"
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to tell
    fs::remove_all(e.path(), ec);
    std::fprintf(stderr, "railyard-pack: removed %s, left by an interrupted run (pid %d is gone)%s\n", e.path().c_str(),
                 static_cast<int>(pid), ec ? (": " + ec.message()).c_str() : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace railyard;
  CLI::App app{"railyard-pack: build a Railyard expert store from a safetensors MoE checkpoint"};
  std::string checkpoint, outDir;
  expert::PackOptions opts;
  bool dryRun = false, progress = ::isatty(2) != 0, noProgress = false, verify = false;
  app.add_option("checkpoint", checkpoint, "a .safetensors file, or a directory with model.safetensors.index.json (shards) or model.safetensors")->required();
  app.add_option("out", outDir, "the store directory to create (must not exist)");
  app.add_option("--scheme", opts.scheme, "expert naming scheme: auto, qwen-moe (also DeepSeek), mixtral")
      ->check(CLI::IsMember({"auto", "qwen-moe", "mixtral"}));
  // A range check on the text: "-4096" was read as 2^64 - 4096 (new-user trial).
  // K, M and G (powers of 1024): "64K" was not a number (new-user trial); the range
  // check then sees the bytes, and any other text as typed.
  app.add_option("--align", opts.alignment, "alignment of tensors and records, bytes (power of two; K, M, G: 1024s)")
      ->transform(tools::SizeSuffix())
      ->check(tools::InRange(std::uint64_t{1}, std::uint64_t{1} << 30));
  app.add_option("--model-id", opts.modelId, "model id written into the manifest (default: the checkpoint's name)");
  app.add_flag("--dry-run", dryRun, "print the layout it would write and exit");
  app.add_flag("--progress", progress, "show a progress bar (default when stderr is a terminal)");
  app.add_flag("--no-progress", noProgress, "no progress bar");
  app.add_flag("--verify", verify, "re-open the written store and check every record's checksum");
  app.footer(
      "Exit status:\n"
      "  0  the store was written (and verified, with --verify), or --dry-run printed its layout\n"
      "  1  the checkpoint could not be read or packed (malformed or truncated safetensors, no MoE\n"
      "     experts recognised, inconsistent experts), OUT was refused (it exists, or its directory\n"
      "     is missing or not writable), or writing or verifying failed; OUT is as it was before\n"
      "  2  bad usage: an unknown or malformed option, no OUT without --dry-run, an --align that is\n"
      "     not a power of two or is below a tensor's element size, an unknown --scheme\n"
      "  128+N  stopped by signal N (SIGINT, SIGTERM, SIGHUP); OUT was not written, nothing left of it\n"
      "A <OUT>.partial-<host>-<pid> directory left by a run on this host that was killed (SIGKILL) is\n"
      "removed by the next run for the same OUT.");
  if (std::optional<int> exitNow = tools::ParseCommandLine(app, argc, argv, "railyard-pack")) return *exitNow;
  if (noProgress) progress = false;
  if (!dryRun && outDir.empty()) {
    std::fprintf(stderr, "railyard-pack: an output directory is needed (or --dry-run)\n");
    return 2;
  }
  while (outDir.size() > 1 && outDir.back() == '/') outDir.pop_back();  // "out/" names out (new-user trial)
  if (!dryRun) {
    if (const std::string why = OutputRefusal(outDir); !why.empty()) {
      std::fprintf(stderr, "railyard-pack: %s\n", why.c_str());
      return 1;
    }
  }
  if (app.count("--model-id") > 0 && opts.modelId.empty()) {  // it meant the default, silently (new-user trial)
    std::fprintf(stderr, "railyard-pack: --model-id needs a name (leave it out for the checkpoint's)\n");
    return 2;
  }
  if (opts.modelId.empty()) {
    std::filesystem::path p(checkpoint);
    if (p.filename().empty()) p = p.parent_path();
    opts.modelId = std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
    // A sharded checkpoint named by its index file: the model is its directory.
    if (opts.modelId == "model.safetensors.index") opts.modelId = p.parent_path().filename().string();
    // From a file name: never a control character in the manifest (which refuses it).
    for (char& c : opts.modelId) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
  }
  for (unsigned char c : opts.modelId) {
    if (c < 0x20 || c == 0x7f) {
      std::fprintf(stderr, "railyard-pack: --model-id holds a control character (0x%02x)\n", c);
      return 2;
    }
  }
  std::vector<expert::CheckpointTensor> tensors;
  if (Status s = expert::ReadCheckpoint(checkpoint, &tensors); !s.ok()) {
    std::fprintf(stderr, "railyard-pack: %s\n", s.message().c_str());
    return 1;
  }
  expert::PackPlan plan;
  if (Status s = expert::PlanPack(tensors, opts, &plan); !s.ok()) {
    std::fprintf(stderr, "railyard-pack: %s\n", s.message().c_str());
    return expert::ExpertErrcOf(s) == expert::ExpertErrc::kInvalidArgument ? 2 : 1;
  }
  std::fputs(plan.Describe().c_str(), stdout);
  std::fflush(stdout);
  if (const std::string w = plan.PaddingWarning(); !w.empty()) std::fprintf(stderr, "railyard-pack: warning: %s\n", w.c_str());
  if (dryRun) {
    // The plan is printed whatever OUT is; a run into it that would be refused says so
    // (new-user trial: a dry run into an existing store passed without a word).
    if (const std::string why = outDir.empty() ? "" : OutputRefusal(outDir); !why.empty()) {
      std::fprintf(stderr, "railyard-pack: --dry-run: a run would be refused: %s\n", why.c_str());
    }
    return 0;
  }
  ReclaimStalePartials(outDir);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C ends a pack stuck in a read at once
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  expert::ProgressFn bar;
  if (progress) {
    bar = [&](uint64_t done, uint64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (done != total && now - last < std::chrono::milliseconds(100)) return;
      last = now;
      const int width = 40, fill = static_cast<int>(width * done / total);
      std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %llu/%llu records", fill, "########################################",
                   width - fill, "", static_cast<int>(100 * done / total), static_cast<unsigned long long>(done),
                   static_cast<unsigned long long>(total));
      if (done == total) std::fputc('\n', stderr);
    };
  }
  if (Status s = expert::ExecutePack(plan, outDir, bar, &g_cancel); !s.ok()) {
    if (g_cancel.load()) {
      std::fprintf(stderr, "%srailyard-pack: interrupted by %s: %s was not written and its partial directory was "
                           "removed\n", progress ? "\n" : "", strsignal(g_signal), outDir.c_str());
      return 128 + g_signal;
    }
    // "nothing was left at OUT" read as if an existing OUT had been removed: say what holds.
    std::fprintf(stderr, "%srailyard-pack: %s (%s is as it was before this run)\n", progress ? "\n" : "", s.message().c_str(),
                 outDir.c_str());
    return 1;
  }
  if (verify) {
    std::unique_ptr<expert::Store> store;
    if (Status s = expert::Store::Open(outDir, true, &store); !s.ok()) {
      std::fprintf(stderr, "railyard-pack: verify: %s\n", s.message().c_str());
      return 1;
    }
    std::printf("verified %s: every record's checksum matches its manifest\n", outDir.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s in %.2f s\n", outDir.c_str(), secs);
  return 0;
}
