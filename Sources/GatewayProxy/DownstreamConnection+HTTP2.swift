import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

extension DownstreamConnection {
    /// ALPN chose h2, or the h2c preface arrived: from now on the socket carries an HTTP/2 session.
    func startHTTP2() {
        do {
            mux = try H2Mux(owner: self, settings: worker.runtime.h2Settings)
        } catch {
            close()
            return
        }
        h2cPossible = false
        muxIdleUntil = worker.loop.now + worker.idleTimeout
        setConnectionDeadline(muxIdleUntil)
        flushOut()   // the server's SETTINGS
    }

    /// Plaintext `http2: true` listeners: whether the first bytes are the h2c preface (nil: not enough bytes yet).
    /// Consulted until the first request is recognised either way.
    func checkH2CPreface() -> Bool? {
        guard h2cPossible else { return false }
        guard let match = H2Preface.matches(inBuf.readable) else { return nil }
        h2cPossible = false
        return match
    }

    /// Writes the session's frames while the socket takes them; closes once the session is over.
    func flushHTTP2(_ mux: H2Mux) {
        if flushing { mux.flushWanted = true; return }
        flushing = true
        defer { flushing = false }
        while !closed {
            mux.flushWanted = false
            // Frames are pulled only while little is waiting for the socket: a client that does not read leaves
            // response bodies queued with their streams (and their upstreams paused), not here.
            var drainedAll = true   // nothing was pulled this round, or all of it went out
            let before = outBuf.readableBytes
            if before < 64 * 1024 {
                guard mux.produce(into: outBuf, limit: 64 * 1024) else {
                    _ = writeWire()
                    close()
                    return
                }
                drainedAll = outBuf.readableBytes > before
            }
            guard writeWire() else { return }
            if mux.flushWanted || (drainedAll && transport.writable && pendingOutput == 0) { continue }
            break
        }
        if !closed && pendingOutput == 0 && mux.isFinished { close() }
    }
}
