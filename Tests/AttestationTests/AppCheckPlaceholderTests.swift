import Testing
@testable import Attestation

/// The Firebase SDK's placeholder token (`client_attestation_failed`) and the near misses that stay malformed.
@Suite struct AppCheckPlaceholderTests {
    private func matches(_ s: String) -> Bool {
        Array(s.utf8).withUnsafeBytes { AppCheckPlaceholder.matches($0) }
    }

    @Test func theSDKsPlaceholderInEverySpelling() {
        #expect(matches("eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ=="))   // {"error":"UNKNOWN_ERROR"}, padded
        #expect(matches("eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ"))     // unpadded
        #expect(matches(StandardBase64.encode(Array(#"{"error":"ATTESTATION_FAILED_2"}"#.utf8))))
    }

    @Test func nearMissesAreNotPlaceholders() {
        for text in [#"{"error":"unknown"}"#, #"{"error":""}"#, #"{"error":"X","a":1}"#, #" {"error":"X"}"#,
                     #"{"error":"X"} "#, #"{"errors":"X"}"#, #"{"error":"<b>"}"#] {
            #expect(!matches(StandardBase64.encode(Array(text.utf8))), "\(text)")
        }
        #expect(!matches("eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ==="))   // padding too long
        #expect(!matches("eyJlcnJvciI6IlVOS05PV05fRVJST1Ii=Q=="))    // '=' inside
        #expect(!matches("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"))           // a JWS shape
        #expect(!matches(String(repeating: "A", count: 101)))          // longer than any placeholder
        #expect(!matches(""))
    }
}
