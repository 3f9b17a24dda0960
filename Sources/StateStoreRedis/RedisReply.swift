internal import CHiredis
import StateStore

/// A Redis reply copied out of hiredis' `redisReply` tree, so no C memory outlives the call that produced it.
enum RedisReply: Sendable, Equatable {
    case string([UInt8])
    case status(String)
    case integer(Int64)
    case null
    case error(String)
    case array([RedisReply])

    /// A write's answer that says it changed nothing: 0, or an array of only 0s. Every write script the store runs
    /// answers 0 for a value it left alone (`consume` for a live value, `advanceCounter` for a counter not raised, …),
    /// so there is nothing for `WAIT` to wait for — and its answer, a refusal, must stand whatever `WAIT` says.
    var changedNothing: Bool {
        switch self {
        case .integer(let n): n == 0
        case .array(let items): items.allSatisfy { $0 == .integer(0) }
        default: false
        }
    }

    /// Replies nest at most this deep here (our scripts return arrays of arrays); deeper is "unexpected".
    static let maxDepth = 4

    /// Copies a hiredis reply; nil for a NULL pointer or a shape we do not understand (never trusts the C tree).
    init?(copying pointer: UnsafeMutablePointer<redisReply>?, depth: Int = 0) {
        guard let pointer, depth <= Self.maxDepth else { return nil }
        let r = pointer.pointee
        func bytes() -> [UInt8] {
            guard let str = r.str, r.len > 0 else { return [] }
            return Array(UnsafeRawBufferPointer(start: str, count: r.len))
        }
        switch r.type {
        case REDIS_REPLY_STRING: self = .string(bytes())
        case REDIS_REPLY_STATUS: self = .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(Int64(r.integer))
        case REDIS_REPLY_NIL: self = .null
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            if r.elements > 0 {
                guard let element = r.element else { return nil }
                elements.reserveCapacity(r.elements)
                for i in 0..<r.elements {
                    guard let child = RedisReply(copying: element[i], depth: depth + 1) else { return nil }
                    elements.append(child)
                }
            }
            self = .array(elements)
        default: return nil
        }
    }

    /// The reply as an integer, or an `.unavailable` error naming `command` (an error reply or a wrong shape).
    func integer(for command: String) throws(StateStoreError) -> Int64 {
        if case .integer(let n) = self { return n }
        throw unexpected(command)
    }

    /// The error a reply of the wrong shape becomes: the backend misbehaved, so `.unavailable`, never a crash.
    func unexpected(_ command: String) -> StateStoreError {
        if case .error(let message) = self {
            return StateStoreError(.unavailable, "redis \(command): \(message)", cause: Self.errorCode(message))
        }
        return StateStoreError(.unavailable, "redis \(command): unexpected reply \(shape)")
    }

    /// The error code a Redis error reply starts with (`WRONGPASS`, `NOAUTH`, `READONLY`, `NOPERM`, `LOADING` …),
    /// lower-cased; `error` when it starts with none.
    static func errorCode(_ message: String) -> String {
        let word = message.prefix { $0 != " " }
        return !word.isEmpty && word.count <= 20 && word.allSatisfy({ $0.isASCII && $0.isUppercase }) ? word.lowercased() : "error"
    }

    private var shape: String {
        switch self {
        case .string: "string"
        case .status(let s): "status \(s)"
        case .integer(let n): "integer \(n)"
        case .null: "nil"
        case .error(let e): "error \(e)"
        case .array(let a): "array of \(a.count)"
        }
    }
}
