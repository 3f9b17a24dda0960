#if canImport(Glibc)
import Glibc
#endif

// `attest-gateway-dev`: the development tools (docs/cli.md). Everything runs from DevCommand (nonisolated code).
exit(DevCommand.run(Array(CommandLine.arguments.dropFirst())))
