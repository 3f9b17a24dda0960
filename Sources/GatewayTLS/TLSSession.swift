internal import COpenSSL
public import GatewayCore
#if canImport(Glibc)
import Glibc
#endif
/// One TLS connection as bytes in, bytes out: the caller moves ciphertext between the socket and `feed` /
/// `takeCiphertext`, and plaintext through `read` / `write`. No I/O inside, so the event loops drive it exactly as
/// they drive the HTTP parser. Loop-confined.
public final class TLSSession {
    private let ssl: OpaquePointer
    /// Ciphertext from the peer (the session reads it).
    private let incoming: OpaquePointer
    /// Ciphertext for the peer (the session writes it).
    private let outgoing: OpaquePointer
    private let context: TLSContext

    public enum ReadResult: Equatable {
        /// `n` plaintext bytes were appended.
        case data(Int)
        /// More ciphertext is needed (send what `takeCiphertext` has first: the handshake may be waiting on us).
        case wantMore
        /// The peer sent close_notify.
        case closed
        /// A protocol or certificate error; the connection must be dropped.
        case failed(String)
    }

    /// A session for `context` (server: accept; client: connect, with `serverName` for SNI and host checks).
    public init(context: TLSContext, serverName: String? = nil) throws(TLSError) {
        guard let ssl = SSL_new(context.ctx) else { throw TLSError("SSL_new") }
        guard let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError("BIO_new")
        }
        SSL_set_bio(ssl, incoming, outgoing)   // the SSL owns both BIOs from here
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        self.context = context
        if context.isServer {
            SSL_set_accept_state(ssl)
        } else {
            if let serverName {
                // An address literal is checked against the certificate's IP SANs and sent as no SNI (RFC 6066
                // allows host names only); a name is sent as SNI and checked against the DNS SANs.
                if Self.isAddressLiteral(serverName) {
                    guard !context.verifiesPeer || X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                        throw TLSError("setting the server address \(serverName)")
                    }
                } else {
                    guard shim_SSL_set_tlsext_host_name(ssl, serverName) == 1,
                          !context.verifiesPeer || SSL_set1_host(ssl, serverName) == 1 else {
                        throw TLSError("setting the server name \(serverName)")
                    }
                }
            }
            SSL_set_connect_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// Hands ciphertext from the socket to the session.
    public func feed(_ ciphertext: UnsafeRawBufferPointer) {
        guard ciphertext.count > 0 else { return }
        _ = BIO_write(incoming, ciphertext.baseAddress, Int32(ciphertext.count))
    }

    /// Runs the handshake as far as it can and decrypts what is there into `out`.
    public func read(into out: ByteBuffer) -> ReadResult {
        var total = 0
        while true {
            out.reserve(16 * 1024)
            let n = SSL_read(ssl, out.writablePointer, Int32(min(out.writableBytes, Int(Int32.max))))
            if n > 0 {
                out.didWrite(Int(n))
                total += Int(n)
                // Nothing decrypted left and no ciphertext left to decrypt: done, without the failing SSL_read
                // (and its error-queue work) that would only say "want read".
                if SSL_pending(ssl) == 0 && shim_BIO_ctrl_pending(incoming) == 0 { return .data(total) }
                continue
            }
            let error = SSL_get_error(ssl, n)
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return total > 0 ? .data(total) : .wantMore
            case SSL_ERROR_ZERO_RETURN:
                return total > 0 ? .data(total) : .closed
            default:
                let why = TLSError("TLS").description
                return total > 0 ? .data(total) : .failed(why)
            }
        }
    }

    /// Encrypts `plaintext`; false once the connection failed (the bytes are not sent). Before the handshake is
    /// complete OpenSSL buffers nothing, so write after `isHandshakeDone`.
    public func write(_ plaintext: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < plaintext.count {
            let n = SSL_write(ssl, plaintext.baseAddress! + offset, Int32(min(plaintext.count - offset, Int(Int32.max))))
            guard n > 0 else {
                ERR_clear_error()
                return false
            }
            offset += Int(n)
        }
        return true
    }

    /// Moves the ciphertext waiting for the peer into `out`; returns how many bytes.
    @discardableResult
    public func takeCiphertext(into out: ByteBuffer) -> Int {
        var total = 0
        while shim_BIO_ctrl_pending(outgoing) > 0 {
            out.reserve(16 * 1024)
            let n = BIO_read(outgoing, out.writablePointer, Int32(min(out.writableBytes, Int(Int32.max))))
            guard n > 0 else { break }
            out.didWrite(Int(n))
            total += Int(n)
        }
        return total
    }

    /// Starts (or, for a client, continues) the handshake without reading application data.
    public func handshake() -> ReadResult {
        let r = SSL_do_handshake(ssl)
        if r == 1 { return .data(0) }
        switch SSL_get_error(ssl, r) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantMore
        default: return .failed(TLSError("TLS handshake").description)
        }
    }

    public var isHandshakeDone: Bool { SSL_is_init_finished(ssl) == 1 }

    /// Whether the peer's certificate is checked (false only by the context's explicit opt-out).
    public var verifiesPeer: Bool { context.verifiesPeer }

    /// Why the peer's certificate was refused (`certificate verify failed` comes with this), nil when it was not:
    /// X.509's own words (`unable to get local issuer certificate`, `certificate has expired`, `hostname mismatch`).
    public var certificateError: String? {
        let result = SSL_get_verify_result(ssl)
        guard result != X509_V_OK else { return nil }
        return String(cString: X509_verify_cert_error_string(result))
    }

    /// An IPv4 or IPv6 address literal (no brackets).
    static func isAddressLiteral(_ host: String) -> Bool {
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v6) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The protocol ALPN chose (`h2`, `http/1.1`), if any.
    public var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// `TLSv1.3` / `TLSv1.2`.
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// Queues close_notify (then `takeCiphertext` and close the socket).
    public func close() {
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }
}
