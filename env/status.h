// Error values shared by every layer of Railyard.
#pragma once

#include <string>
#include <utility>

namespace railyard {

/// Error classes. The numeric values equal NCCL's ncclResult_t
/// (src/include/nccl_common.h / nccl.h, NCCL 2.28.9) so a Status converts to the
/// value a plugin entry point returns without a table.
enum class Code : int {
  kOk = 0,
  kSystemError = 2,      ///< network, hardware or syscall failure (a socket broke, a peer died)
  kInternalError = 3,    ///< NCCL misused the API (bad pointer, request budget exceeded)
  kInvalidArgument = 4,  ///< an argument out of range
  kInvalidUsage = 5,     ///< user or configuration error (bad env value, wrong handle)
  kRemoteError = 6,      ///< the peer reported or caused the failure (bad completion, protocol)
};

/// Outcome of an operation: a Code plus a human-readable message that names
/// what failed (variable, peer, rail, sequence, ...). Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  /// The ncclResult_t value for this status (0 when ok).
  int ncclResult() const { return static_cast<int>(code_); }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status SystemError(std::string m) { return {Code::kSystemError, std::move(m)}; }
inline Status InternalError(std::string m) { return {Code::kInternalError, std::move(m)}; }
inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status InvalidUsage(std::string m) { return {Code::kInvalidUsage, std::move(m)}; }
inline Status RemoteError(std::string m) { return {Code::kRemoteError, std::move(m)}; }

}  // namespace railyard

/// Returns early from the enclosing function when `expr` yields a failed Status.
#define RY_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::railyard::Status ry_status_ = (expr);      \
    if (!ry_status_.ok()) return ry_status_;     \
  } while (0)
