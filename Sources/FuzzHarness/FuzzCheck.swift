/// Traps with `message` when `condition` is false. Harness invariants use this rather than `assert` (dropped from
/// optimised builds) or `precondition` (which traps there without printing its message): a violated invariant must
/// stop the fuzzer, and fail the regression test, with its reason in every build.
@inline(__always)
func fuzzCheck(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() { fatalError("fuzz invariant violated: " + message(), file: file, line: line) }
}
