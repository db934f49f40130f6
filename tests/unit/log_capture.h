// Captures what the plugin logs while alive (log::SetSinkForTesting), for tests
// that check a message was logged. Header-only: every tests/unit/*_test.cc is its
// own binary.
#pragma once

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "env/log.h"

namespace railyard::test_support {

/// Installs a log sink on construction and removes it on destruction. Thread-safe:
/// helper threads may log while a test reads.
class LogCapture {
 public:
  LogCapture() {
    log::SetSinkForTesting([this](log::Level level, const std::string& msg) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.emplace_back(level, msg);
    });
  }
  ~LogCapture() { log::SetSinkForTesting(nullptr); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  /// Every message so far as "<LEVEL> <text>" (log::LevelName), in order.
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [level, msg] : messages_) out.push_back(std::string(log::LevelName(level)) + " " + msg);
    return out;
  }
  /// The texts of the messages logged at exactly `level`, in order.
  std::vector<std::string> At(log::Level level) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [l, msg] : messages_) {
      if (l == level) out.push_back(msg);
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<log::Level, std::string>> messages_;
};

}  // namespace railyard::test_support
