#if canImport(Glibc)
import Glibc
#endif
import Foundation
import GatewayCLI
import GatewayConfig
import GatewayCrypto
import GatewayCore
import GatewayPosix
import GatewayComposition
import GatewayProxy
import Observability
import Synchronization

/// `attest-gateway serve`: loads the configuration, starts one event loop per worker and runs until SIGTERM or
/// SIGINT, then drains.
enum ServeCommand {
    static let help = CommandHelp(
        "attest-gateway serve", synopsis: ["[--config FILE] [--workers N] [--no-access-log] [--log-level LEVEL]"],
        summary: "Serves the configuration until SIGTERM or SIGINT (then drains); SIGHUP reloads it.",
        options: [
            OptionHelp("--config", "FILE", "the configuration file (default gateway.yml)"),
            OptionHelp("--workers", "N", "event-loop threads, 1 to 256 (default: one per online CPU)"),
            OptionHelp("--no-access-log", nil, "write no access log (otherwise one JSON line per request on standard output)"),
            OptionHelp("--log-level", "LEVEL", "the lowest level logged on standard error: debug, info (default), warn or error"),
        ])

    static let usage = CommandHelp.usage([help], notes: """
    SIGTERM/SIGINT: stop accepting, finish in-flight requests (up to limits.drain_timeout), exit 0.
    SIGHUP: reload FILE; an invalid file (or a change to listeners, admin or state) keeps the running configuration.
    The access log (one JSON line per request) goes to standard output, other logs to standard error.
    """)

    static func run(_ args: [String]) -> Int32 {
        let options: Options
        switch Options.parse(args, for: help) {
        case .success(let o): options = o
        case .failure(let e): printErr("serve: \(e.message)\n\n\(usage)"); return ExitCode.usage
        }
        if options.help { print(usage); return ExitCode.ok }
        // First of all, so a SIGTERM during start-up waits for sigwait below (and drains) instead of killing us,
        // and every thread started later inherits the mask.
        Threads.blockSignals()
        let path = options.values["--config"] ?? "gateway.yml"
        if let level = options.values["--log-level"] {
            guard let l = Logger.Level(rawValue: level) else {
                printErr("serve: --log-level must be debug, info, warn or error\n\n\(usage)")
                return ExitCode.usage
            }
            Logger.setMinimumLevel(l)
        }
        var workerCount = Threads.onlineCPUs
        if let w = options.values["--workers"] {
            guard let n = Int(w), n >= 1, n <= 256 else {
                printErr("serve: --workers must be a number from 1 to 256\n\n\(usage)")
                return ExitCode.usage
            }
            workerCount = n
        }

        let config: GatewayConfiguration
        do {
            let loaded = try ConfigLoader.loadDetailed(path: path)
            config = loaded.configuration
            logWarnings(loaded.warnings)
        } catch {
            for e in error.errors { printErr(e.description) }
            return ExitCode.failure
        }
        let runtime: ProxyRuntime
        do { runtime = try Composition.runtime(config) } catch {
            printErr("serve: \(error.description)")
            return ExitCode.failure
        }
        ProcessMetrics.shared.setConfigHash(configHash(path))
        let current = RuntimeSlot(runtime)

        let budget = ConnectionBudget(limit: config.limits.maxConnections)
        var workers: [ProxyWorker] = []
        do {
            for i in 0..<workerCount {
                let w = try ProxyWorker(index: i, runtime: runtime, budget: budget, accessLog: !options.flags.contains("--no-access-log"))
                try w.bind()
                workers.append(w)
            }
        } catch {
            printErr("serve: \(error)")
            return ExitCode.failure
        }
        var admin: SmallHTTPServer? = nil
        var rollout: RolloutHistory? = nil
        if let a = config.admin {
            do {
                let address = try SocketAddress.resolve(host: a.address.host, port: a.address.port)
                let loops = workers
                let history = RolloutHistory(workers: workers)
                rollout = history
                let sources = AdminSources(runtime: { current.get() },
                                           metrics: {
                                               let runtime = current.get()
                                               return MetricsEndpoint.render(workers: loops, budget: budget, upstreams: runtime.upstreams,
                                                                             keySets: runtime.verifiers.keySets)
                                           }, rollout: history)
                admin = try SmallHTTPServer.admin(address: address, sources: sources)
                Logger.info("admin listening", ["address": address.description, "endpoints": "/ /stats /healthz /readyz /metrics"])
            } catch {
                printErr("serve: admin.address: \(error)")
                return ExitCode.failure
            }
        }
        runtime.verifiers.startBackgroundWork()
        runtime.state?.startBackgroundWork()
        runtime.fraudMetricRefreshers(running: true)
        rollout?.start()
        let finished = Atomic<Int>(0)
        let adminThread = admin.map { server in Threads.start { server.run() } }
        let threads = workers.map { w in
            Threads.start {
                w.run()
                finished.add(1, ordering: .sequentiallyConsistent)
            }
        }
        for (l, a) in zip(config.listeners, runtime.listenAddresses) {
            Logger.info("listening", ["listener": l.name, "address": a.description], numbers: ["workers": Int64(workerCount)])
        }

        while true {
            let sig = Threads.waitForSignal()
            if sig == SIGHUP {
                reload(path: path, current: current, workers: workers)
                continue
            }
            break
        }
        Logger.info("draining", numbers: ["timeout_ms": Int64(config.limits.drainTimeoutMillis)])
        for w in workers { w.loop.execute { w.beginDrain() } }
        let deadline = MonotonicClock.nowMillis() + UInt64(config.limits.drainTimeoutMillis)
        while finished.load(ordering: .sequentiallyConsistent) < workers.count && MonotonicClock.nowMillis() < deadline {
            usleep(10_000)
        }
        if finished.load(ordering: .sequentiallyConsistent) < workers.count {
            let open = workers.count - finished.load(ordering: .sequentiallyConsistent)
            Logger.warn("drain timeout reached; closing remaining connections", numbers: ["loops_busy": Int64(open)])
            for w in workers { w.loop.execute { w.forceStop() } }
        }
        for t in threads { Threads.join(t) }
        rollout?.stop()
        if let admin, let adminThread {
            admin.loop.execute { admin.loop.stop() }
            Threads.join(adminThread)
        }
        let final = current.get()
        final.fraudMetricRefreshers(running: false)
        final.verifiers.stopBackgroundWork()
        final.state?.stopBackgroundWork()
        Logger.info("stopped")
        return ExitCode.ok
    }

    /// SIGHUP: builds the new configuration next to the running one and swaps it into every loop; requests in
    /// flight finish on the configuration they started with. Any error keeps the running configuration.
    static func reload(path: String, current: RuntimeSlot, workers: [ProxyWorker]) {
        let old = current.get()
        let loaded: LoadedConfiguration
        do { loaded = try ConfigLoader.loadDetailed(path: path) } catch {
            for e in error.errors { Logger.error("reload: invalid configuration; keeping the running one", ["error": e.description]) }
            ProcessMetrics.shared.reload(ok: false, error: error.errors.map(\.description).joined(separator: "\n"), fileHash: configHash(path))
            return
        }
        let config = loaded.configuration
        let next: ProxyRuntime
        do { next = try Composition.runtime(config, reusing: old) } catch {
            Logger.error("reload: cannot apply; keeping the running configuration", ["error": "\(error)"])
            ProcessMetrics.shared.reload(ok: false, error: "\(error)", fileHash: configHash(path))
            return
        }
        next.verifiers.warm(after: old.verifiers)
        current.set(next)
        for w in workers { w.loop.execute { w.install(next) } }
        next.verifiers.startBackgroundWork(after: old.verifiers)
        old.fraudMetricRefreshers(running: false)
        next.fraudMetricRefreshers(running: true)
        old.verifiers.stopBackgroundWork(keeping: next.verifiers)
        if next.state !== old.state { next.state?.startBackgroundWork() }
        let hash = configHash(path)
        ProcessMetrics.shared.setConfigHash(hash)
        ProcessMetrics.shared.reload(ok: true)
        Logger.info("reload: configuration applied", ["config_hash": hash], numbers: ["routes": Int64(config.routes.count)])
        logWarnings(loaded.warnings)
    }

    /// The configuration's warnings (what `check-config` prints as `FILE:LINE:COLUMN: path: warning: message`), one
    /// warn line each — at start, and for the new file after a reload that applied it.
    static func logWarnings(_ warnings: [ConfigWarning]) {
        for w in warnings { Logger.warn("configuration warning", ["warning": w.description]) }
    }

    /// The first 16 hex digits of the file's SHA-256 (the `attest_gateway_config_info` label).
    static func configHash(_ path: String) -> String {
        guard let bytes = FileManager.default.contents(atPath: path) else { return "" }
        return String(hexString(SHA256Hasher.hash(Array(bytes))).prefix(16))
    }
}
