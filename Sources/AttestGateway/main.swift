#if canImport(Glibc)
import Glibc
#endif

// Everything runs from CLI (nonisolated code): closures written here at top level would be main-actor isolated.
exit(CLI.run(Array(CommandLine.arguments.dropFirst())))
