// CLibFuzzer: the one libFuzzer entry point GatewayFuzz calls. The symbol exists only when the executable is built
// with `-sanitize=fuzzer` (which links libFuzzer without its own `main`), so it is referenced only under FUZZING.
#pragma once
#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer with `argv` (libFuzzer flags and corpus directories) over `callback`; returns its exit code.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
