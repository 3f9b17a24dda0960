/// What one fetch of a key set produced: the raw document and how long its origin allows it to be cached.
public struct KeySetFetch: Sendable {
    /// The document as fetched (a JWKS for App Check); parsed by the cache's `parse` closure.
    public let body: [UInt8]
    /// The origin's `Cache-Control: max-age`, 0 for `no-store`/`no-cache`, nil when it said nothing (a file).
    /// The cache clamps it between the policy's minimum lifetime and its `maxAgeSeconds`.
    public let maxAgeSeconds: Int?

    public init(body: [UInt8], maxAgeSeconds: Int?) {
        self.body = body
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// A fetch result from an HTTP body and its `Cache-Control` value.
    public init(body: [UInt8], cacheControl: String?) {
        self.init(body: body, maxAgeSeconds: Self.maxAge(fromCacheControl: cacheControl))
    }

    /// The lifetime a `Cache-Control` value grants: `max-age=N` gives N; `no-store` or `no-cache` give 0
    /// (the cache then applies its minimum lifetime rather than refetching on every request); every other
    /// directive (`public`, `s-maxage`, `must-revalidate`, ...) is ignored. Nil when nothing applies.
    public static func maxAge(fromCacheControl value: String?) -> Int? {
        guard let value else { return nil }
        var maxAge: Int?
        for rawDirective in value.split(separator: ",") {
            let directive = rawDirective.trimmingASCIIWhitespace().lowercased()
            if directive == "no-store" || directive == "no-cache" { return 0 }
            guard directive.hasPrefix("max-age=") else { continue }
            var digits = directive.dropFirst("max-age=".count)
            if digits.count >= 2, digits.first == "\"", digits.last == "\"" { digits = digits.dropFirst().dropLast() }
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
            // A huge value saturates: the policy cap applies anyway.
            let seconds = Int(digits) ?? Int.max
            if maxAge == nil { maxAge = seconds }
        }
        return maxAge
    }
}

/// What the request path may use right now.
public enum KeySetState<KeySet: Sendable>: Sendable {
    /// Within its lifetime.
    case ready(KeySet)
    /// Past its lifetime but within the stale grace: refreshes are failing, the last good set keeps serving.
    case stale(KeySet)
    /// Never loaded, or stale for longer than the grace: tokens cannot be verified.
    case unavailable
}

/// The outcome of one refresh attempt, also passed to the cache's `onEvent` observer (for logs and metrics).
public enum KeySetEvent: Sendable, Equatable {
    /// A new set is serving; `keys` is its size when known, `lifetimeSeconds` the lifetime it was given.
    case loaded(keys: Int?, lifetimeSeconds: Int)
    /// The fetch or the parse failed; the previous set (if any) keeps serving.
    case failed(String)
    /// Nothing was due (or another refresh was already running), so nothing was fetched.
    case notDue
}

extension Substring {
    func trimmingASCIIWhitespace() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}
