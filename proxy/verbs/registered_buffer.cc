#include <sys/mman.h>

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
  if (mr_ != nullptr) (void)GlobalMrCache().Deregister(mr_);
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

}  // namespace railyard::proxy::verbs
