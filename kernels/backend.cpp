#include "kernels/backend.h"

namespace flashserve::kernels {

const char* op_name(Op op) {
  switch (op) {
#define FLASHSERVE_OP_NAME(op, name, params, args, use) \
  case Op::op: return #name;
    FLASHSERVE_BACKEND_OPS(FLASHSERVE_OP_NAME)
#undef FLASHSERVE_OP_NAME
  }
  return "?";
}

}  // namespace flashserve::kernels
