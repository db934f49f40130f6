#include "proxy/fabric/event.h"

namespace railyard::fabric {

const char* OpTypeName(OpType op) {
  switch (op) {
    case OpType::kNone: return "none";
    case OpType::kSend: return "send";
    case OpType::kWrite: return "write";
    case OpType::kRead: return "read";
    case OpType::kFetchAdd: return "fetch-add";
    case OpType::kFence: return "fence";
  }
  return "unknown";
}

}  // namespace railyard::fabric
