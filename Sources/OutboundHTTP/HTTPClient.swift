/// A response from a control-plane HTTP call: the status, the final header block and the body.
///
/// Any status is a response, including 4xx and 5xx; only transport failures are `HTTPClientError`s.
public struct HTTPResponse: Sendable {
    /// The status code of the final response (redirects are not followed, so a 3xx is returned as is).
    public let status: Int
    /// Header fields in arrival order, names as sent; folded lines and the status line are excluded.
    public let headers: [(name: String, value: String)]
    /// The body, at most the `maxBodyBytes` the call allowed.
    public let body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first field called `name` (compared case-insensitively, ASCII), or nil.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        for field in headers where field.name.lowercased() == wanted { return field.value }
        return nil
    }
}

/// A blocking HTTP client for control-plane calls (key sets, attestation services).
///
/// Implementations are injected so that policies above them (such as the key-set cache) can be tested
/// without a network; `CurlHTTPClient` is the production one.
public protocol HTTPClient: Sendable {
    /// Performs a GET. Blocking: call it from a background thread, never from an event loop.
    ///
    /// - Parameters:
    ///   - headers: extra request header fields, sent in order.
    ///   - timeoutMillis: the limit for the whole exchange, connecting and TLS included.
    ///   - maxBodyBytes: a longer body fails the call with `HTTPClientError.Kind.bodyTooLarge`.
    func get(_ url: String, headers: [(String, String)], timeoutMillis: Int, maxBodyBytes: Int)
        -> Result<HTTPResponse, HTTPClientError>

    /// Performs a POST with `body`. Blocking: call it from a background thread, never from an event loop.
    func post(_ url: String, headers: [(String, String)], body: [UInt8], timeoutMillis: Int, maxBodyBytes: Int)
        -> Result<HTTPResponse, HTTPClientError>
}

extension HTTPClient {
    /// A fetch closure for a key set (JWKS) at `url`, for the key-set cache's refresher thread.
    ///
    /// The closure blocks for at most `timeoutMillis`. It throws `HTTPClientError` on a transport failure
    /// and on any status other than 200 (a 304 cannot happen: no validators are sent). It returns the body
    /// and the `Cache-Control` value (several fields joined with ", "), which the cache turns into a lifetime.
    public func keySetFetch(url: String, timeoutMillis: Int, maxBodyBytes: Int = 1 << 20)
        -> @Sendable () throws -> (body: [UInt8], cacheControl: String?) {
        return { [self] in
            let result = get(url, headers: [("Accept", "application/json")], timeoutMillis: timeoutMillis,
                             maxBodyBytes: maxBodyBytes)
            let response: HTTPResponse
            switch result {
            case .success(let r): response = r
            case .failure(let error): throw error
            }
            guard response.status == 200 else {
                throw HTTPClientError(kind: .unexpectedStatus(response.status),
                                      description: "key set fetch from \(url): HTTP \(response.status)")
            }
            let cacheControl = response.headers
                .filter { $0.name.lowercased() == "cache-control" }
                .map(\.value)
            return (response.body, cacheControl.isEmpty ? nil : cacheControl.joined(separator: ", "))
        }
    }
}
