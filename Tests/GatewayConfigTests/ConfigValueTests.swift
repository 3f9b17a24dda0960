import Testing
@testable import GatewayConfig

/// The scalar parsers, as tables.
@Suite struct ConfigValueTests {
    @Test(arguments: [
        ("500ms", 500), ("0s", 0), ("30s", 30_000), ("5m", 300_000), ("6h", 21_600_000), ("24h", 86_400_000),
        ("1ms", 1),
    ])
    func validDurationsAreMilliseconds(text: String, millis: Int) {
        #expect(ConfigValue.parseDuration(text) == millis)
    }

    @Test(arguments: ["", "5", "5 minutes", "1.5s", "-1s", "+1s", "5d", "s", "ms", " 5s", "5S", "99999999999999999999h", "1_000ms"])
    func invalidDurationsAreNil(text: String) {
        #expect(ConfigValue.parseDuration(text) == nil)
    }

    @Test(arguments: [
        ("512", 512), ("0", 0), ("64KiB", 65_536), ("10MiB", 10_485_760), ("1GiB", 1_073_741_824), ("32KiB", 32_768),
    ])
    func validSizesAreBytes(text: String, bytes: Int) {
        #expect(ConfigValue.parseSize(text) == bytes)
    }

    @Test(arguments: ["", "10MB", "1KB", "1 KiB", "1.5MiB", "-1", "KiB", "1kib", "1TiB", "99999999999999999999GiB"])
    func invalidSizesAreNil(text: String) {
        #expect(ConfigValue.parseSize(text) == nil)
    }

    @Test(arguments: [
        ("127.0.0.1:8080", "127.0.0.1", 8080), ("[::1]:8080", "::1", 8080), ("localhost:80", "localhost", 80),
        ("0.0.0.0:8080", "0.0.0.0", 8080), ("[::]:443", "::", 443), ("gw-1.internal:65535", "gw-1.internal", 65535),
        ("127.0.0.1:0", "127.0.0.1", 0),
    ])
    func validSocketAddressesAreParsed(text: String, host: String, port: Int) {
        #expect(ConfigValue.parseSocketAddress(text) == SocketAddressConfig(host: host, port: UInt16(port)))
    }

    @Test(arguments: ["", "8080", ":8080", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "::1:8080", "[::1]8080",
                      "[::1", "[nothost]:80", "256.1.1.1:80", "host name:80", "127.0.0.1:-1", "127.0.0.1:80a"])
    func invalidSocketAddressesAreNil(text: String) {
        #expect(ConfigValue.parseSocketAddress(text) == nil)
    }

    @Test func socketAddressDescriptionBracketsIPv6() {
        #expect(SocketAddressConfig(host: "::1", port: 80).description == "[::1]:80")
        #expect(SocketAddressConfig(host: "10.0.0.1", port: 80).description == "10.0.0.1:80")
    }

    @Test(arguments: [("localhost", true), ("127.0.0.1", true), ("127.9.9.9", true), ("::1", true),
                      ("10.0.0.1", false), ("example.com", false), ("::2", false)])
    func loopbackHostsAreRecognized(host: String, loopback: Bool) {
        #expect(ConfigValue.isLoopback(host) == loopback)
    }

    @Test(arguments: ["X-Firebase-AppCheck", "x-apple-devicecheck", "A!#$%&'*+-.^_`|~"])
    func tokenHeaderNamesAreValid(name: String) {
        #expect(ConfigValue.isHeaderName(name))
    }

    @Test(arguments: ["", "X Header", "X:Header", "Ünicode", "X\tY"])
    func nonTokenHeaderNamesAreInvalid(name: String) {
        #expect(!ConfigValue.isHeaderName(name))
    }
}
