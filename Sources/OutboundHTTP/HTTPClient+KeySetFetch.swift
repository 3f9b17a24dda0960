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
