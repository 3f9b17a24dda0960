import Attestation
public import GatewayConfig
import GatewayProxy
import GatewayTLS
import KeySetCache

/// `check-config`'s second half: reads every file a loaded configuration names, with the same code `serve` reads
/// them with at start-up, so a file that would stop `serve` (a missing root CA, a `.p8` that is not an EC key, a
/// certificate without its key) fails `check-config` too.
///
/// Local files only: nothing here touches the network (a `jwks_url` is not fetched, upstream hosts are not
/// resolved) or opens the state store. A file the configuration says is generated when absent (CONFIG.md
/// Additions: `verdict_token.key_file`) is checked only when it exists.
public enum ConfigFileCheck {
    /// One file that cannot be used: the YAML path of the key that names it (`verifiers.ios.root_ca`,
    /// `listeners[0].tls.private_key`) and why.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public let path: String
        public let message: String
        public var description: String { "\(path): \(message)" }
    }

    /// Every problem, in configuration order (listeners, upstreams, verifiers). Empty when all files read.
    public static func problems(in config: GatewayConfiguration) -> [Problem] {
        var problems: [Problem] = []
        for (index, listener) in config.listeners.enumerated() {
            guard let tls = listener.tls else { continue }
            // As ProxyRuntime builds it: chain, key, and that they belong together.
            let path = "listeners[\(index)].tls"
            let alpn = listener.http2 ? ["h2", "http/1.1"] : ["http/1.1"]
            do { _ = try TLSContext.server(certificateChainFile: tls.certificate, privateKeyFile: tls.privateKey, alpn: alpn) } catch {
                let key = error.file == tls.privateKey && tls.privateKey != tls.certificate ? "private_key" : "certificate"
                problems.append(Problem(path: path + "." + key, message: error.description))
            }
        }
        for upstream in config.upstreams where upstream.tls {
            // As ProxyRuntime builds it: the CA file, or the system store when there is none.
            do { _ = try TLSContext.client(caFile: upstream.caFile, alpn: upstream.protocolVersion == .h2 ? ["h2"] : ["http/1.1"]) } catch {
                let key = upstream.caFile == nil ? "url" : "ca_file"
                problems.append(Problem(path: "upstreams.\(upstream.name).\(key)", message: error.description))
            }
        }
        for verifier in config.verifiers {
            problems += verifierProblems(verifier)
        }
        if config.state.backend == .redis, let path = config.state.passwordFile {
            do { _ = try StateBackends.redisPassword(path) } catch {
                problems.append(Problem(path: "state.password_file", message: error.message))
            }
        }
        if config.state.backend == .redis, let path = config.state.sentinel?.passwordFile {
            do { _ = try StateBackends.redisPassword(path, key: "state.sentinel.password_file") } catch {
                problems.append(Problem(path: "state.sentinel.password_file", message: error.message))
            }
        }
        if config.state.backend == .redis, config.state.usesTLS {
            do { _ = try StateBackends.redisTLS(config.state) } catch {
                problems.append(Problem(path: error.key ?? "state.url", message: error.message))
            }
        }
        if let path = config.verdictToken?.keyFile, let why = VerdictSigner.keyFileProblem(path) {
            problems.append(Problem(path: "verdict_token.key_file", message: why))
        }
        return problems
    }

    static func verifierProblems(_ verifier: VerifierConfig) -> [Problem] {
        typealias Read = () throws(ProxyRuntime.StartupError) -> Void
        let base = "verifiers.\(verifier.name)"
        var problems: [Problem] = []
        func record(_ read: Read) {
            do { try read() } catch { problems.append(Problem(path: error.key ?? base, message: error.message)) }
        }
        switch verifier.kind {
        case .appCheck(let c):
            // A jwks_url is left alone: fetching it is the network.
            guard c.jwksFile != nil else { break }
            if case .failed(let why) = ConfigFiles.keySet(c, onEvent: nil).refreshIfDue(force: true) {
                problems.append(Problem(path: base + ".jwks_file", message: why))
            }
        case .appAttest(let c):
            let root: Read = { _ = try ConfigFiles.certificate(c.rootCA, builtin: AppAttestRoots.apple, key: base + ".root_ca") }
            record(root)
            guard let fraud = c.fraudMetric else { break }
            // serve reads the receipt root only with fraud_metric (nothing uses it without).
            let receiptRoot: Read = {
                _ = try ConfigFiles.certificate(c.receiptRootCA, builtin: AppAttestRoots.appleRootG3, key: base + ".receipt_root_ca")
            }
            let key: Read = { _ = try ConfigFiles.appleKey(fraud.privateKey, key: base + ".fraud_metric.private_key") }
            record(receiptRoot)
            record(key)
            if let problem = caFileProblem(fraud.caFile, path: base + ".fraud_metric.ca_file") { problems.append(problem) }
        case .deviceCheck(let c):
            let key: Read = { _ = try ConfigFiles.appleKey(c.privateKey, key: base + ".private_key") }
            record(key)
            if let problem = caFileProblem(c.caFile, path: base + ".ca_file") { problems.append(problem) }
        case .playIntegrity(let c):
            let keys: Read = { _ = try ConfigFiles.playIntegrityKeys(c, base: base) }
            record(keys)
            if let file = c.serviceAccountFile {
                let account: Read = {
                    _ = try ConfigFiles.serviceAccount(file, key: base + ".service_account_file", usesTokenURI: c.tokenURL == nil)
                }
                record(account)
            }
            if let problem = caFileProblem(c.caFile, path: base + ".ca_file") { problems.append(problem) }
        }
        return problems
    }

    /// The trust anchor libcurl is given for Apple's servers (or their stand-ins). curl reads it at each call, so a
    /// bad one would only show as failing calls; it is read here with OpenSSL's loader, the one curl uses.
    static func caFileProblem(_ caFile: String?, path: String) -> Problem? {
        guard let caFile else { return nil }
        do { _ = try TLSContext.client(caFile: caFile, alpn: []) } catch {
            return Problem(path: path, message: error.description)
        }
        return nil
    }
}
