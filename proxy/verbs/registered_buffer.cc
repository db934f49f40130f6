#include <sys/mman.h>

#include "env/log.h"
#include "proxy/verbs/verbs_comm.h"

namespace railyard::proxy::verbs {

Status RegisteredBuffer::Create(size_t bytes, std::unique_ptr<RegisteredBuffer>* out) {
  std::unique_ptr<RegisteredBuffer> b(new RegisteredBuffer());
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return SystemError("mmap of " + std::to_string(bytes) + " bytes: " + ErrnoText(errno));
  b->data_ = p;  // zero-filled by mmap
  b->bytes_ = bytes;
  RY_RETURN_IF_ERROR(GlobalMrCache().Register(p, bytes, 0 /* internal: never shared with NCCL registrations */, &b->mr_));
  *out = std::move(b);
  return Status::Ok();
}

RegisteredBuffer::~RegisteredBuffer() {
  // An MR the HCA may still hold is never unmapped (a late access would land in reused
  // pages): kept until exit.
  if (mr_ != nullptr) {
    if (Status s = GlobalMrCache().Deregister(mr_); !s.ok()) {
      RY_WARN("verbs: a registered buffer's deregistration failed (%s); its %zu bytes stay mapped until the process "
              "exits",
              s.message().c_str(), static_cast<size_t>(bytes_));
      return;
    }
  }
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

}  // namespace railyard::proxy::verbs
