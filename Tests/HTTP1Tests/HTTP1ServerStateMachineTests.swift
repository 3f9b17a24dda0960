import Testing
import HTTP1

/// The server connection's decisions without a socket: keep-alive and pipelining, early answers, timeouts,
/// backpressure, a client hanging up, SIGTERM.
@Suite struct HTTP1ServerStateMachineTests {
    @Test func aKeepAliveExchangeReturnsToAwaitingTheNextHead() {
        var m = HTTP1ServerStateMachine()
        let r1 = m.headBytesArrived()
        #expect(r1 == .header)
        let r2 = m.headBytesArrived()
        #expect(r2 == nil)   // one header deadline per head, not one per read
        m.headReceived(keepAlive: true, hasBody: false)
        #expect(m.phase == .exchanging && m.requestDone && !m.wantsRead)
        m.responseBegan()
        let r3 = m.exchangeEnded(buffered: false)
        #expect(r3 == .nextRequest(.idle))
        #expect(m == HTTP1ServerStateMachine())   // nothing of the last exchange is left over
    }

    @Test func aPipelinedRequestAlreadyBufferedRunsOnTheHeaderDeadline() {
        var m = HTTP1ServerStateMachine()
        _ = m.headBytesArrived()
        m.headReceived(keepAlive: true, hasBody: false)
        let r4 = m.exchangeEnded(buffered: true)
        #expect(r4 == .nextRequest(.header))
        #expect(m.sawRequestBytes)
        let r5 = m.headBytesArrived()
        #expect(r5 == nil)
    }

    @Test func connectionCloseAndHTTP10EndTheConnectionAfterTheResponse() {
        var m = HTTP1ServerStateMachine()
        m.headReceived(keepAlive: false, hasBody: false)
        let r6 = m.exchangeEnded(buffered: true)
        #expect(r6 == .close)
        #expect(m.phase == .closing && !m.wantsRead)
        let r7 = m.outputDrained()
        #expect(r7)
        #expect(m.phase == .lingering && m.wantsRead)   // lingering reads (and drops) the client's last bytes
    }

    @Test func anAnswerBeforeTheWholeBodyClosesTheConnection() {
        var m = HTTP1ServerStateMachine()
        m.headReceived(keepAlive: true, hasBody: true)
        #expect(m.takesBody && m.wantsRead)
        m.responseBegan()
        // The rest of the body is still on the wire: it cannot be told from the next request.
        let r8 = m.exchangeEnded(buffered: false)
        #expect(r8 == .close)
    }

    @Test func theBodyWaitsWhileWorkRunsOffTheLoopOrTheUpstreamIsFull() {
        var m = HTTP1ServerStateMachine()
        m.headReceived(keepAlive: true, hasBody: true)
        m.awaitWork(true)
        #expect(!m.takesBody && !m.wantsRead)
        let r9 = m.awaitWork(false)
        #expect(r9)
        let r10 = m.awaitWork(false)
        #expect(!r10)   // a second answer for the same wait is stale
        m.pauseBody(true)
        #expect(!m.wantsRead)
        m.pauseBody(false)
        #expect(m.takesBody)
        m.bodyEnded()
        #expect(!m.takesBody && !m.wantsRead)
        let r11 = m.exchangeEnded(buffered: false)
        #expect(r11 == .nextRequest(.idle))
    }

    @Test func timeoutsDependOnWhatIsInFlight() {
        var m = HTTP1ServerStateMachine()
        #expect(m.timedOut(pendingOutput: false) == .close)           // a silent connection
        _ = m.headBytesArrived()
        #expect(m.timedOut(pendingOutput: false) == .requestTimeout)  // half a head
        m.headReceived(keepAlive: true, hasBody: true)
        #expect(m.timedOut(pendingOutput: false) == .bodyTimeout)     // a body that stopped
        m.responseBegan()
        #expect(m.timedOut(pendingOutput: false) == .close)           // ... after the response started: cut
        m.bodyEnded()
        #expect(m.timedOut(pendingOutput: false) == .disarm)          // waiting on the upstream's own deadline
        #expect(m.timedOut(pendingOutput: true) == .close)            // a client that stopped reading
    }

    @Test func parseErrorsAreAnsweredUnlessTheResponseStarted() {
        var m = HTTP1ServerStateMachine()
        let r12 = m.parseError()
        #expect(r12 == .answerAndClose)
        #expect(m.closeAfter)
        var n = HTTP1ServerStateMachine()
        n.headReceived(keepAlive: true, hasBody: true)
        n.responseBegan()
        let r13 = n.parseError()
        #expect(r13 == .cut)
    }

    @Test func aClientHangingUpIsAnsweredOnlyWhenItsRequestIsWhole() {
        var idle = HTTP1ServerStateMachine()
        let r14 = idle.peerClosed()
        #expect(r14 == .now)
        var cut = HTTP1ServerStateMachine()
        cut.headReceived(keepAlive: true, hasBody: true)
        let r15 = cut.peerClosed()
        #expect(r15 == .now)
        var whole = HTTP1ServerStateMachine()
        whole.headReceived(keepAlive: true, hasBody: false)
        let r16 = whole.peerClosed()
        #expect(r16 == .afterResponse)
        let r17 = whole.exchangeEnded(buffered: true)
        #expect(r17 == .close)
    }

    @Test func drainingClosesIdleConnectionsNowAndBusyOnesAfterTheirResponse() {
        var idle = HTTP1ServerStateMachine()
        let r18 = idle.drain()
        #expect(r18 == .now)
        var partial = HTTP1ServerStateMachine()
        _ = partial.headBytesArrived()
        let r19 = partial.drain()
        #expect(r19 == .afterResponse)
        var busy = HTTP1ServerStateMachine()
        busy.headReceived(keepAlive: true, hasBody: false)
        let r20 = busy.drain()
        #expect(r20 == .afterResponse)
        let r21 = busy.exchangeEnded(buffered: true)
        #expect(r21 == .close)
        // A head that arrives while draining is the last one.
        var late = HTTP1ServerStateMachine()
        _ = late.drain()
        late.headReceived(keepAlive: true, hasBody: false)
        #expect(late.closeAfter)
    }
}
