#if canImport(Glibc)
import Glibc
#endif

// Everything runs from FuzzCommand (nonisolated code): closures written here at top level would be main-actor isolated.
exit(FuzzCommand.run(CommandLine.arguments))
