#if canImport(Glibc)
import Glibc
#endif
import GatewayCore

/// The access log of one event loop: one JSON line per request, buffered and written to standard output after
/// each batch of events (one `write` per batch, not per request).
///
/// Never receives a token or a query string: callers pass the path only, and of the header values only Host and
/// User-Agent (`Client`), escaped and bounded.
/// Loop-confined.
public final class AccessLog {
    private let buffer = ByteBuffer(capacity: 16 * 1024)
    private var wallClock = WallClock()
    private let fd: Int32
    public let enabled: Bool

    /// Pipes interleave writes above PIPE_BUF between processes/threads, so flushes stay below it and end on a line.
    private let maxWrite = 4096

    public init(fd: Int32 = 1, enabled: Bool = true) {
        self.fd = fd
        self.enabled = enabled
    }

    /// Who sent a request, as far as an operator needs it: the peer, the client a trusted proxy reports, the Host
    /// and User-Agent as sent (escaped, the agent cut at 256 bytes), and the deciding verifier and app id.
    public struct Client {
        public var address: UnsafeRawBufferPointer
        public var forwardedFor: UnsafeRawBufferPointer?
        public var host: UnsafeRawBufferPointer?
        public var userAgent: UnsafeRawBufferPointer?
        public var verifier: String?
        public var appID: String?

        public init(address: UnsafeRawBufferPointer, forwardedFor: UnsafeRawBufferPointer? = nil, host: UnsafeRawBufferPointer? = nil,
                    userAgent: UnsafeRawBufferPointer? = nil, verifier: String? = nil, appID: String? = nil) {
            self.address = address
            self.forwardedFor = forwardedFor
            self.host = host
            self.userAgent = userAgent
            self.verifier = verifier
            self.appID = appID
        }
    }

    /// The upstream's answer: the address that gave it and the time to its response head.
    public struct Upstream {
        public var address: String
        public var micros: UInt64
        public init(address: String, micros: UInt64) {
            self.address = address
            self.micros = micros
        }
    }

    /// One entry. `path` must already exclude the query string; `route` is a JSON value (`"name"` or `null`).
    public func record(time startMicros: UInt64, route: [UInt8], method: UnsafeRawBufferPointer, path: UnsafeRawBufferPointer,
                       status: Int, upstreamStatus: Int, bytesIn: Int, bytesOut: Int, verdict: StaticString,
                       reason: String? = nil, requestID: UnsafeRawBufferPointer? = nil, protocol proto: StaticString? = nil,
                       client: Client? = nil, upstream: Upstream? = nil) {
        guard enabled else { return }
        let b = buffer
        // Where this line starts, as an offset from the unread start: an append may compact the buffer, which
        // moves the indices but not the offsets.
        let lineOffset = b.readableBytes
        b.append("{\"time\":\"" as StaticString)
        wallClock.appendNow(to: b)
        b.append("\",\"route\":" as StaticString)
        b.append(route)
        b.append(",\"method\":\"" as StaticString)
        JSONText.appendEscaped(method, to: b)
        b.append("\",\"path\":\"" as StaticString)
        JSONText.appendEscaped(path, to: b)
        if let proto {
            b.append("\",\"protocol\":\"" as StaticString)
            b.append(proto)
        }
        if let client {
            b.append("\",\"client\":\"" as StaticString)
            JSONText.appendEscaped(client.address, to: b)
            if let f = client.forwardedFor {
                b.append("\",\"forwarded_for\":\"" as StaticString)
                JSONText.appendEscaped(UnsafeRawBufferPointer(rebasing: f.prefix(64)), to: b)
            }
            if let h = client.host {
                b.append("\",\"host\":\"" as StaticString)
                JSONText.appendEscaped(UnsafeRawBufferPointer(rebasing: h.prefix(256)), to: b)
            }
            if let ua = client.userAgent {
                b.append("\",\"user_agent\":\"" as StaticString)
                JSONText.appendEscaped(UnsafeRawBufferPointer(rebasing: ua.prefix(256)), to: b)
            }
        }
        b.append("\",\"status\":" as StaticString)
        b.appendDecimal(status)
        b.append(",\"upstream_status\":" as StaticString)
        if upstreamStatus > 0 { b.appendDecimal(upstreamStatus) } else { b.append("null" as StaticString) }
        if let upstream {
            b.append(",\"upstream_address\":\"" as StaticString)
            appendEscaped(upstream.address, to: b)
            b.append("\",\"upstream_ms\":" as StaticString)
            appendMillis(Int(upstream.micros), to: b)
        }
        b.append(",\"bytes_in\":" as StaticString)
        b.appendDecimal(bytesIn)
        b.append(",\"bytes_out\":" as StaticString)
        b.appendDecimal(bytesOut)
        b.append(",\"duration_ms\":" as StaticString)
        appendMillis(Int(MonotonicClock.nowMicros() &- startMicros), to: b)
        b.append(",\"verdict\":\"" as StaticString)
        b.append(verdict)
        if let reason {
            b.append("\",\"reason\":\"" as StaticString)
            b.append(reason)   // a closed set of snake_case codes: nothing to escape
        }
        if let verifier = client?.verifier {
            b.append("\",\"verifier\":\"" as StaticString)
            appendEscaped(verifier, to: b)
        }
        if let appID = client?.appID {
            b.append("\",\"app_id\":\"" as StaticString)
            appendEscaped(appID, to: b)
        }
        if let requestID, requestID.count > 0 {
            b.append("\",\"request_id\":\"" as StaticString)
            JSONText.appendEscaped(requestID, to: b)
        }
        b.append("\"}\n" as StaticString)
        if b.readableBytes > maxWrite { flush(upTo: b.readerIndex + lineOffset) }
    }

    /// Microseconds as milliseconds with three decimals (a JSON number).
    private func appendMillis(_ micros: Int, to b: ByteBuffer) {
        b.appendDecimal(micros / 1000)
        b.append(byte: UInt8(ascii: "."))
        let frac = micros % 1000
        b.append(byte: UInt8(48 + frac / 100))
        b.append(byte: UInt8(48 + (frac / 10) % 10))
        b.append(byte: UInt8(48 + frac % 10))
    }

    private func appendEscaped(_ text: String, to b: ByteBuffer) {
        var text = text
        text.withUTF8 { JSONText.appendEscaped(UnsafeRawBufferPointer($0), to: b) }
    }

    /// Writes everything buffered.
    public func flush() { flush(upTo: buffer.writerIndex) }

    /// Writes whole lines up to `end` (a writer index) in chunks no larger than `maxWrite`.
    private func flush(upTo end: Int) {
        var remaining = end - buffer.readerIndex
        while remaining > 0 {
            let start = buffer.readerIndex
            var count = min(remaining, maxWrite)
            if count < remaining {
                // Back up to the last newline inside the chunk so every write holds whole lines.
                var i = start + count - 1
                while i > start && buffer.base.load(fromByteOffset: i, as: UInt8.self) != UInt8(ascii: "\n") { i -= 1 }
                if i > start { count = i + 1 - start }
            }
            let n = write(fd, buffer.base + start, count)
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                buffer.clear()   // stdout gone or full: drop the log rather than block the loop
                return
            }
            remaining -= n
            buffer.consume(n)
        }
    }
}
