import Testing
import GatewayCore

@Suite struct ByteBufferTests {
    @Test func appendsGrowsAndConsumes() {
        let b = ByteBuffer(capacity: 16)
        for _ in 0..<100 { b.append("0123456789" as StaticString) }
        #expect(b.readableBytes == 1000)
        b.consume(995)
        #expect(String(decoding: b.readable, as: UTF8.self) == "56789")
        b.consume(5)
        #expect(b.isEmpty && b.readerIndex == 0)
    }

    @Test func decimalAndHexAreASCII() {
        let b = ByteBuffer(capacity: 16)
        b.appendDecimal(0); b.append(byte: 32); b.appendDecimal(1234567890); b.append(byte: 32); b.appendDecimal(-5)
        b.append(byte: 32); b.appendHex(0); b.append(byte: 32); b.appendHex(0x1f2e); b.append(byte: 32); b.appendHex(65536)
        #expect(String(decoding: b.readable, as: UTF8.self) == "0 1234567890 -5 0 1f2e 10000")
    }

    @Test func reserveCompactsBeforeGrowing() {
        let b = ByteBuffer(capacity: 32)
        b.append(Array(repeating: 1, count: 30))
        b.consume(20)
        b.reserve(20)
        #expect(b.capacity == 32)
        #expect(b.readableBytes == 10)
    }
}
