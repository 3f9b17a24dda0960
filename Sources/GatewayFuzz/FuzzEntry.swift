import FuzzHarness

/// The target libFuzzer's callback runs: set once by ``FuzzCommand`` before the driver starts, then only read
/// (libFuzzer calls the callback from one thread).
nonisolated(unsafe) var selectedTarget = FuzzTarget.http1Request

/// libFuzzer's per-input callback, exported under the name libFuzzer links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selectedTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
