// tcdouble_fail_next and tcdouble_reset (the live counts sit beside the tables they count).
#include "engine.h"
#include "tcdouble-control.h"

using namespace tcdouble;

void tcdouble_fail_next(const char *function, int code) {
  Call call;
  if (function != nullptr) call.s.injected_failures[function] = code;
}

void tcdouble_reset(void) {
  Call call;
  reset_all(call.s);
}
