// The CUDA/NCCL double's self-test: `selftest <section> [arguments]`, run by test/cuda-double.test.ts.
#include <cstring>
#include <string>

#include "check.h"

int main(int argc, char **argv) {
  const std::string section = argc > 1 ? argv[1] : "";
  if (section == "ipc-child" && argc == 4) return ipc_child(argv[2], argv[3]);
  if (section == "runtime") {
    test_runtime();
  } else if (section == "streams") {
    test_streams();
  } else if (section == "collectives") {
    test_collectives();
  } else if (section == "p2p") {
    test_p2p();
  } else if (section == "comms") {
    test_comms();
  } else if (section == "ipc") {
    test_ipc(argv[0]);
  } else if (section == "kernels" && argc == 3) {
    test_kernels(argv[2]);
  } else if (section == "kernel-vectors" && argc == 4) {
    test_kernel_vectors(argv[2], argv[3]);
  } else if (section == "wait-limit") {
    test_wait_limit();
  } else {
    fprintf(stderr, "usage: selftest runtime|streams|collectives|p2p|comms|ipc|wait-limit|kernels <ptx>|"
                    "kernel-vectors <ptx> <vectors>\n");
    return 2;
  }
  expect_nothing_alive();
  printf("ok %s\n", section.c_str());
  return 0;
}
