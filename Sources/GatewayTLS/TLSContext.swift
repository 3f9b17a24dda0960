internal import COpenSSL
import GatewayCore

/// Why a TLS context could not be built (a configuration problem: files, keys, trust anchors).
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The file that could not be read or did not fit (the certificate chain, the private key, the CA file), when
    /// the problem is one file's: `check-config` reports it at the key that names that file.
    public let file: String?

    init(_ what: String, file: String? = nil) {
        self.file = file
        var detail = ""
        let code = ERR_get_error()
        if code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            detail = ": " + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        ERR_clear_error()
        description = what + detail
    }
}

/// An OpenSSL `SSL_CTX` for one listener (server) or one upstream (client): TLS 1.2 and 1.3 only, modern cipher
/// suites (ECDHE with AES-GCM or ChaCha20-Poly1305 for 1.2; OpenSSL's 1.3 defaults), ALPN. Immutable once built
/// and shared by every loop; each connection makes its own `TLSSession` from it.
public final class TLSContext: @unchecked Sendable {
    let ctx: OpaquePointer
    /// Server: the protocols offered, in preference order (`h2`, `http/1.1`), as the ALPN wire list.
    private let alpnWire: [UInt8]
    public let isServer: Bool

    static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    /// Client: whether the server's certificate (and name) is checked; false only by an explicit opt-out.
    public let verifiesPeer: Bool

    private init(ctx: OpaquePointer, alpn: [String], isServer: Bool, verifiesPeer: Bool = true) {
        self.ctx = ctx
        self.isServer = isServer
        self.verifiesPeer = verifiesPeer
        alpnWire = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
    }

    deinit { SSL_CTX_free(ctx) }

    /// A server context from a PEM certificate chain (leaf first) and its PEM private key; `alpn` in preference
    /// order (a client offering none of them gets no ALPN, which means HTTP/1.1).
    public static func server(certificateChainFile: String, privateKeyFile: String, alpn: [String] = ["h2", "http/1.1"]) throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new") }
        let context = TLSContext(ctx: ctx, alpn: alpn, isServer: true)
        try context.restrictVersions()
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateChainFile) == 1 else {
            throw TLSError("cannot read the certificate chain \(certificateChainFile)", file: certificateChainFile)
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError("cannot read the private key \(privateKeyFile)", file: privateKeyFile)
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw TLSError("the private key does not match the certificate", file: privateKeyFile)
        }
        // No session tickets' worth of state per connection beyond OpenSSL's defaults; no renegotiation (1.2).
        SSL_CTX_set_options(ctx, shim_SSL_server_options())
        if !alpn.isEmpty {
            shim_SSL_CTX_set_alpn_select_cb(ctx, { _, out, outLength, clientList, clientLength, arg in
                guard let arg, let out, let outLength else { return SSL_TLSEXT_ERR_NOACK }
                let context = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
                return context.alpnWire.withUnsafeBufferPointer { server -> Int32 in
                    var selected: UnsafeMutablePointer<UInt8>? = nil
                    var selectedLength: UInt8 = 0
                    let result = SSL_select_next_proto(&selected, &selectedLength, server.baseAddress, UInt32(server.count),
                                                       clientList, clientLength)
                    guard result == OPENSSL_NPN_NEGOTIATED, let selected else { return SSL_TLSEXT_ERR_NOACK }
                    out.pointee = UnsafePointer(selected)
                    outLength.pointee = selectedLength
                    return SSL_TLSEXT_ERR_OK
                }
            }, Unmanaged.passUnretained(context).toOpaque())
        }
        return context
    }

    /// A client context (TLS to upstreams, to Redis): peer certificates verified against `caFile`, or the system
    /// store; `certificateFile` and `keyFile` (PEM, together) present a client certificate; `verifyPeer: false`
    /// accepts any server certificate (an explicit opt-out, for tests: the session then checks no name either).
    public static func client(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
                              verifyPeer: Bool = true, alpn: [String] = ["http/1.1"]) throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new") }
        let context = TLSContext(ctx: ctx, alpn: alpn, isServer: false, verifiesPeer: verifyPeer)
        try context.restrictVersions()
        SSL_CTX_set_verify(ctx, verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else { throw TLSError("cannot read the CA file \(caFile)", file: caFile) }
        } else if verifyPeer {
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else { throw TLSError("cannot load the system CA store") }
        }
        if let certificateFile {
            guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1 else {
                throw TLSError("cannot read the client certificate \(certificateFile)", file: certificateFile)
            }
        }
        if let keyFile {
            guard SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM) == 1 else {
                throw TLSError("cannot read the client key \(keyFile)", file: keyFile)
            }
        }
        if certificateFile != nil || keyFile != nil {
            guard certificateFile != nil, keyFile != nil else {
                throw TLSError("a client certificate needs its key, and a key its certificate", file: certificateFile ?? keyFile)
            }
            guard SSL_CTX_check_private_key(ctx) == 1 else {
                throw TLSError("the client key does not match the client certificate", file: keyFile)
            }
        }
        if !alpn.isEmpty {
            let wire = context.alpnWire
            // SSL_CTX_set_alpn_protos returns 0 on success (unlike most of OpenSSL).
            guard wire.withUnsafeBufferPointer({ SSL_CTX_set_alpn_protos(ctx, $0.baseAddress, UInt32($0.count)) }) == 0 else {
                throw TLSError("SSL_CTX_set_alpn_protos")
            }
        }
        return context
    }

    private func restrictVersions() throws(TLSError) {
        guard shim_SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1,
              shim_SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1,
              SSL_CTX_set_cipher_list(ctx, Self.tls12Ciphers) == 1 else { throw TLSError("setting TLS versions and ciphers") }
    }
}
