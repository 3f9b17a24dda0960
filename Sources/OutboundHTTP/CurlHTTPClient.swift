internal import CCurl

/// The production `HTTPClient`: libcurl with a fresh easy handle per call (control-plane traffic is rare,
/// so connection reuse is not worth shared mutable state).
///
/// Security choices, all deliberate:
/// - TLS 1.2 or newer, the peer certificate and the host name always verified.
/// - Redirects are never followed: a key-set URL that redirects is a configuration error, not something to
///   chase to another origin.
/// - Only the `http` and `https` schemes (no `file:`, `ftp:`, ...). Whether plain `http` is acceptable for a
///   given URL is the configuration's decision.
/// - Proxies come from the environment (`HTTPS_PROXY`, `https_proxy`, `NO_PROXY`), which libcurl reads by
///   default; this type does not override that.
/// - `CURLOPT_NOSIGNAL`, so timeouts never raise SIGALRM in a multithreaded process.
public final class CurlHTTPClient: HTTPClient, Sendable {
    private let caFile: String?
    private let userAgent: String

    /// - Parameters:
    ///   - caFile: a PEM file of trust anchors used *instead of* the system CA store (tests, private PKI);
    ///     nil means the system store.
    ///   - userAgent: the `User-Agent` sent with every request.
    public init(caFile: String? = nil, userAgent: String = "attest-gateway") {
        _ = CurlGlobal.initialized
        self.caFile = caFile
        self.userAgent = userAgent
    }

    public func get(_ url: String, headers: [(String, String)], timeoutMillis: Int, maxBodyBytes: Int)
        -> Result<HTTPResponse, HTTPClientError> {
        perform(url, headers: headers, body: nil, timeoutMillis: timeoutMillis, maxBodyBytes: maxBodyBytes)
    }

    public func post(_ url: String, headers: [(String, String)], body: [UInt8], timeoutMillis: Int,
                     maxBodyBytes: Int) -> Result<HTTPResponse, HTTPClientError> {
        perform(url, headers: headers, body: body, timeoutMillis: timeoutMillis, maxBodyBytes: maxBodyBytes)
    }

    private func perform(_ url: String, headers: [(String, String)], body: [UInt8]?, timeoutMillis: Int,
                         maxBodyBytes: Int) -> Result<HTTPResponse, HTTPClientError> {
        guard CurlGlobal.initialized else { return .failure(.invalidRequest("curl_global_init failed")) }
        guard let handle = CurlEasyHandle() else { return .failure(.invalidRequest("curl_easy_init failed")) }
        let sink = CurlTransferSink(maxBodyBytes: maxBodyBytes)
        do {
            try configure(handle, url: url, timeoutMillis: timeoutMillis, maxBodyBytes: maxBodyBytes)
            var lines = headers.map { "\($0.0): \($0.1)" }
            if let body {
                try handle.setPostBody(body)
                lines.append("Expect:")  // no 100-continue round trip
            }
            try handle.setHeaders(lines)
            try handle.setCallbacks(sink)
        } catch {
            return .failure(error)
        }
        let code = withExtendedLifetime(sink) { handle.perform() }
        guard code == CURLE_OK else {
            return .failure(Self.classify(code, detail: handle.errorDetail(code), sink: sink))
        }
        return .success(HTTPResponse(status: handle.responseCode, headers: sink.headers, body: sink.body))
    }

    private func configure(_ handle: CurlEasyHandle, url: String, timeoutMillis: Int,
                           maxBodyBytes: Int) throws(HTTPClientError) {
        try handle.set(CURLOPT_URL, url)
        try handle.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try handle.set(CURLOPT_NOSIGNAL, 1)
        // 0 would mean "no timeout" to libcurl; a control-plane call must always be bounded.
        try handle.set(CURLOPT_TIMEOUT_MS, max(1, timeoutMillis))
        try handle.set(CURLOPT_FOLLOWLOCATION, 0)
        try handle.set(CURLOPT_SSL_VERIFYPEER, 1)
        try handle.set(CURLOPT_SSL_VERIFYHOST, 2)
        try handle.set(CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2)
        if let caFile { try handle.set(CURLOPT_CAINFO, caFile) }
        try handle.set(CURLOPT_USERAGENT, userAgent)
        // Rejects early when Content-Length announces too much; the body callback enforces it regardless.
        try handle.set(CURLOPT_MAXFILESIZE_LARGE, offT: max(0, maxBodyBytes))
    }

    /// Maps a libcurl result code onto the closed `HTTPClientError.Kind` list.
    private static func classify(_ code: CURLcode, detail: String, sink: CurlTransferSink) -> HTTPClientError {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout(detail)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .dns(detail)
        case CURLE_COULDNT_CONNECT:
            return .connect(detail)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_USE_SSL_FAILED, CURLE_SSL_CRL_BADFILE:
            return .tls(detail)
        case CURLE_FILESIZE_EXCEEDED:
            return .bodyTooLarge(sink.maxBodyBytes)
        case CURLE_WRITE_ERROR where sink.bodyTooLarge:
            return .bodyTooLarge(sink.maxBodyBytes)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .invalidRequest(detail)
        default:
            return .transport(detail)
        }
    }
}

/// `curl_global_init` exactly once per process, before the first handle (Swift runs a static's
/// initializer once, thread-safely).
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
}
