#if FUZZING
import CLibFuzzer
#endif
import FuzzHarness
#if canImport(Glibc)
import Glibc
#endif

/// `GatewayFuzz --target=NAME …`: with FUZZING (built with `-sanitize=fuzzer`, see scripts/fuzz.sh) libFuzzer runs
/// the target; without it, the files and directories named are replayed through the target once each.
enum FuzzCommand {
    static let usage = """
        usage: GatewayFuzz --target=NAME [libFuzzer flags] [CORPUS_DIR…]   (built with -DFUZZING: libFuzzer)
               GatewayFuzz --target=NAME FILE|DIR…                         (otherwise: replay the inputs once)
        targets: \(FuzzTarget.allCases.map(\.name).joined(separator: ", "))
        """

    static func run(_ arguments: [String]) -> Int32 {
        let prefix = "--target="
        guard let option = arguments.dropFirst().first(where: { $0.hasPrefix(prefix) }),
              let target = FuzzTarget(rawValue: String(option.dropFirst(prefix.count))) else {
            print(usage)
            return 2
        }
        selectedTarget = target
        #if FUZZING
        // The arguments go to libFuzzer unchanged: it ignores flags starting with "--" (so --target= survives
        // into the child processes it starts for -minimize_crash and -merge) and reads the rest itself.
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        // A closure, not `fuzzTestOneInput` itself: converting the @_cdecl function to a C pointer emits a second
        // definition of its symbol, which the linker refuses.
        return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzTestOneInput(data, size) }
        #else
        return replay(target, paths: arguments.dropFirst().filter { !$0.hasPrefix("-") })
        #endif
    }

    /// Runs every file under `paths` through `target`, naming each before it runs, so a trap names its input.
    static func replay(_ target: FuzzTarget, paths: [String]) -> Int32 {
        var count = 0
        for path in paths {
            let files = FuzzReplay.files(under: path)
            if files.isEmpty { print("GatewayFuzz: nothing to replay at \(path)") }
            for file in files {
                guard let data = FuzzReplay.contents(of: file) else {
                    print("GatewayFuzz: cannot read \(file)")
                    return 1
                }
                print("replay \(target.name) \(file) (\(data.count) bytes)")
                fflush(nil)  // all streams: the name must be out before a trap
                target.run(data)
                count += 1
            }
        }
        print("GatewayFuzz: \(count) inputs replayed through \(target.name), no invariant violated")
        return 0
    }
}
