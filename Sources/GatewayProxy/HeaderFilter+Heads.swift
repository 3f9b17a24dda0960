import GatewayCore
import HTTP1

/// The heads the gateway writes: the request to the upstream and the response to the client.
extension HeaderFilter {
    /// Appends the request head for the upstream: request line (origin-form, base path prefixed), the client's
    /// fields minus hop-by-hop / X-Attest-* / Expect, then X-Forwarded-* and framing.
    /// `strip`: lower-case names of further fields to drop (token headers); `extra`: complete field lines to add
    /// (the verdict headers). `target`: the canonical target the request was routed on (nil: the one sent);
    /// `authority`: an absolute-form target's authority, sent as Host. `trustedPeer`: the client is one of the
    /// listener's `trusted_proxies`, so its forwarding headers are kept (and X-Forwarded-For appended to); from any
    /// other client they are dropped and X-Forwarded-For/-Proto/-Host are the gateway's alone.
    static func appendUpstreamRequestHead(_ head: HTTP1RequestHead, basePath: [UInt8], clientAddress: [UInt8],
                                          strip: [[UInt8]] = [], extra: UnsafeRawBufferPointer? = nil,
                                          requestID: UnsafeRawBufferPointer? = nil, https: Bool = false,
                                          target canonical: [UInt8]? = nil, authority: Range<Int>? = nil,
                                          trustedPeer: Bool = false, upgrade: Bool = false, to out: ByteBuffer) {
        head.bytes.withUnsafeBytes { raw in
            out.append(UnsafeRawBufferPointer(rebasing: raw[head.method]))
            out.append(byte: UInt8(ascii: " "))
            if !basePath.isEmpty { out.append(basePath) }
            if let canonical {
                out.append(canonical)
            } else {
                out.append(originForm(UnsafeRawBufferPointer(rebasing: raw[head.target])))
            }
            out.append(" HTTP/1.1\r\n" as StaticString)
            if let authority {
                out.append("Host: " as StaticString)
                out.append(UnsafeRawBufferPointer(rebasing: raw[authority]))
                out.append("\r\n" as StaticString)
            }

            let named = connectionNamed(raw, head.fields)
            var forwardedFor: [Range<Int>] = []
            var sentProto = false, sentHost = false
            var sentContentLength = false
            for field in head.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[field.name])
                switch classify(name) {
                case .forward:
                    if name.count == 14 && eq(name, "content-length") {
                        // The length the gateway framed the body by, once, in canonical form: "05", "5, 5" or a
                        // repeated field are valid but read differently by lenient parsers (octal, first/last wins).
                        if !sentContentLength {
                            sentContentLength = true
                            out.append(name)
                            out.append(": " as StaticString)
                            if case .contentLength(let n) = head.framing { out.appendDecimal(n) } else { out.append(byte: UInt8(ascii: "0")) }
                            out.append("\r\n" as StaticString)
                        }
                        continue
                    }
                    // Host: replaced when an absolute-form target's authority routed the request.
                    if authority != nil && name.count == 4 && eq(name, "host") { continue }
                case .xForwardedFor:
                    // Several fields form one list (RFC 9110 5.3); a client's chain counts only from a trusted proxy.
                    if trustedPeer && !field.value.isEmpty { forwardedFor.append(field.value) }
                    continue
                case .xForwardedProto:
                    guard trustedPeer, !sentProto else { continue }
                    sentProto = true
                case .xForwardedHost:
                    guard trustedPeer, !sentHost else { continue }
                    sentHost = true
                case .forwardingChain:
                    guard trustedPeer else { continue }
                case .drop, .attest, .connection:
                    continue
                }
                if !named.isEmpty && isNamed(name, raw, named) { continue }
                if !strip.isEmpty && isStripped(name, strip) { continue }
                out.append(name)
                out.append(": " as StaticString)
                out.append(UnsafeRawBufferPointer(rebasing: raw[field.value]))
                out.append("\r\n" as StaticString)
            }
            out.append("X-Forwarded-For: " as StaticString)
            for ff in forwardedFor {
                out.append(UnsafeRawBufferPointer(rebasing: raw[ff]))
                out.append(", " as StaticString)
            }
            out.append(clientAddress)
            out.append("\r\n" as StaticString)
            if !sentProto {
                out.append(https ? "X-Forwarded-Proto: https\r\n" as StaticString : "X-Forwarded-Proto: http\r\n")
            }
            if !sentHost, let host = authority ?? head.host {
                out.append("X-Forwarded-Host: " as StaticString)
                out.append(UnsafeRawBufferPointer(rebasing: raw[host]))
                out.append("\r\n" as StaticString)
            }
            if case .chunked = head.framing {
                out.append("Transfer-Encoding: chunked\r\n" as StaticString)
            }
            if let requestID, requestID.count > 0 {
                out.append("X-Request-Id: " as StaticString)
                out.append(requestID)
                out.append("\r\n" as StaticString)
            }
            if upgrade {
                // A WebSocket handshake the route allows: the one protocol switch the gateway forwards, spelled
                // canonically (the client's Upgrade and Connection fields are hop-by-hop and were dropped above).
                out.append("Connection: Upgrade\r\nUpgrade: websocket\r\n" as StaticString)
            }
            if let extra { out.append(extra) }
            out.append("\r\n" as StaticString)
        }
    }

    /// The upstream's 101 for the client: its end-to-end fields (Sec-WebSocket-Accept, -Protocol, -Extensions,
    /// cookies) and the switch itself, spelled canonically.
    static func appendSwitchingProtocolsHead(_ head: HTTP1ResponseHead, to out: ByteBuffer) {
        out.append("HTTP/1.1 101 Switching Protocols\r\n" as StaticString)
        appendClientResponseFields(head, keepFraming: false, to: out)
        out.append("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n" as StaticString)
    }

    /// Appends the response head for the client. `chunked` re-frames the body; `connection` is the Connection
    /// field to add (nil for none).
    static func appendClientResponseHead(_ head: HTTP1ResponseHead, keepFraming: Bool, chunked: Bool,
                                         connection: StaticString?, to out: ByteBuffer) {
        out.append("HTTP/1.1 " as StaticString)
        out.appendDecimal(head.status)
        out.append(byte: UInt8(ascii: " "))
        head.bytes.withUnsafeBytes { out.append(UnsafeRawBufferPointer(rebasing: $0[head.reason])) }
        out.append("\r\n" as StaticString)
        appendClientResponseFields(head, keepFraming: keepFraming, to: out)
        if chunked { out.append("Transfer-Encoding: chunked\r\n" as StaticString) }
        if let connection {
            out.append("Connection: " as StaticString)
            out.append(connection)
            out.append("\r\n" as StaticString)
        }
        out.append("\r\n" as StaticString)
    }

    /// The field lines of `forEachClientResponseField`, as HTTP/1.1 text.
    @inline(__always)
    static func appendClientResponseFields(_ head: HTTP1ResponseHead, keepFraming: Bool, to out: ByteBuffer) {
        forEachClientResponseField(head, keepFraming: keepFraming) { name, value in
            out.append(name)
            out.append(": " as StaticString)
            out.append(value)
            out.append("\r\n" as StaticString)
        }
    }

    /// The upstream response's fields the client may see, in order: hop-by-hop fields, those Connection names and
    /// framing fields left out (`keepFraming`: a HEAD/304 response's Transfer-Encoding describes the body it would
    /// have had, so HTTP/1.1 keeps it). HTTP/1.1 and HTTP/2 responses are built from the same list.
    @inline(__always)
    static func forEachClientResponseField(_ head: HTTP1ResponseHead, keepFraming: Bool,
                                           _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) {
        head.bytes.withUnsafeBytes { raw in
            let named = connectionNamed(raw, head.fields)
            for field in head.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[field.name])
                switch classify(name) {
                case .forward, .attest, .xForwardedFor, .xForwardedProto, .xForwardedHost, .forwardingChain:
                    if !named.isEmpty && isNamed(name, raw, named) { continue }
                case .drop:
                    if keepFraming && name.count == 17 && eq(name, "transfer-encoding") { break }
                    continue
                case .connection:
                    continue
                }
                body(name, UnsafeRawBufferPointer(rebasing: raw[field.value]))
            }
        }
    }
}
