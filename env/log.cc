// Logging sinks: NCCL's logger when installed, else stderr; plus a test hook.
#include "env/log.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace railyard::log {
namespace {

using TestSink = std::function<void(Level, const std::string&)>;

// -1 = not yet initialised from RAILYARD_DEBUG.
constexpr int kUnset = -1;
std::atomic<int> gStderrLevel{kUnset};
std::atomic<NcclLogger> gNcclLogger{nullptr};

// The test sink is rare and slow-path only: a flag for the fast check, a mutex
// for the function itself.
std::atomic<bool> gHasTestSink{false};
std::mutex gTestSinkMu;
std::shared_ptr<TestSink> gTestSink;  // guarded by gTestSinkMu

int StderrThreshold() {
  int level = gStderrLevel.load(std::memory_order_relaxed);
  if (level != kUnset) return level;
  // Racing first calls compute the same value; whichever store lands is fine,
  // but never overwrite a value set by SetStderrLevel in the meantime.
  int fromEnv = static_cast<int>(Level::kWarn);
  if (const char* env = std::getenv("RAILYARD_DEBUG"); env != nullptr && *env != '\0') {
    if (auto parsed = ParseLevelName(env)) fromEnv = static_cast<int>(*parsed);
  }
  int expected = kUnset;
  if (gStderrLevel.compare_exchange_strong(expected, fromEnv)) return fromEnv;
  return expected;
}

const char* Basename(const char* file) {
  if (file == nullptr) return "?";
  const char* slash = std::strrchr(file, '/');
  return slash != nullptr ? slash + 1 : file;
}

// vsnprintf into a std::string, however long the message.
std::string Format(const char* fmt, va_list args) {
  char buf[512];
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(buf, sizeof(buf), fmt, copy);
  va_end(copy);
  if (n < 0) return std::string("(log format error: ") + fmt + ")";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, args);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::shared_ptr<TestSink> CurrentTestSink() {
  std::lock_guard<std::mutex> lock(gTestSinkMu);
  return gTestSink;
}

}  // namespace

std::optional<Level> ParseLevelName(std::string_view name) {
  static constexpr struct {
    const char* name;
    Level level;
  } kNames[] = {{"NONE", Level::kNone},
                {"VERSION", Level::kVersion},
                {"WARN", Level::kWarn},
                {"INFO", Level::kInfo},
                {"TRACE", Level::kTrace}};
  for (const auto& entry : kNames) {
    std::string_view candidate(entry.name);
    if (candidate.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = std::toupper(static_cast<unsigned char>(name[i])) == candidate[i];
    }
    if (same) return entry.level;
  }
  return std::nullopt;
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kNone: return "NONE";
    case Level::kVersion: return "VERSION";
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kAbort: return "ABORT";
    case Level::kTrace: return "TRACE";
  }
  return "UNKNOWN";
}

void SetNcclLogger(NcclLogger logger) { gNcclLogger.store(logger, std::memory_order_release); }

void SetStderrLevel(Level level) {
  gStderrLevel.store(static_cast<int>(level), std::memory_order_relaxed);
}

void SetSinkForTesting(std::function<void(Level, const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(gTestSinkMu);
  if (sink) {
    gTestSink = std::make_shared<TestSink>(std::move(sink));
    gHasTestSink.store(true, std::memory_order_release);
  } else {
    gTestSink.reset();
    gHasTestSink.store(false, std::memory_order_release);
  }
}

bool Enabled(Level level) {
  if (level == Level::kNone) return false;
  if (gHasTestSink.load(std::memory_order_acquire)) return true;
  if (gNcclLogger.load(std::memory_order_acquire) != nullptr) return true;
  int effective = level == Level::kAbort ? static_cast<int>(Level::kWarn) : static_cast<int>(level);
  return effective <= StderrThreshold();
}

void Write(Level level, unsigned long subsys, const char* file, int line, const char* fmt, ...) {
  if (!Enabled(level)) return;
  va_list args;
  va_start(args, fmt);
  std::string message = Format(fmt, args);
  va_end(args);

  if (gHasTestSink.load(std::memory_order_acquire)) {
    if (auto sink = CurrentTestSink()) {
      (*sink)(level, message);
      return;
    }
  }
  if (NcclLogger logger = gNcclLogger.load(std::memory_order_acquire)) {
    logger(static_cast<int>(level), subsys, Basename(file), line, "%s", message.c_str());
    return;
  }
  // stderr is unbuffered and fprintf locks it, so one call = one unbroken line.
  std::fprintf(stderr, "railyard %s [pid %d] %s:%d %s\n", LevelName(level),
               static_cast<int>(getpid()), Basename(file), line, message.c_str());
}

}  // namespace railyard::log
