import Testing
#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import CCBOR
import CNGHTTP2
import CYAML
import CHiredis
import CSQLite
import CCurl
import CGatewayShims

/// Each Debian C library is reachable through its system library target and links: a call into each proves it.
@Suite struct CLibrariesLinkTests {
    @Test func openSSLIsVersion3() {
        #expect(OpenSSL_version_num() >= 0x3000_0000)
    }

    @Test func libcborDecodesAnUnsignedInteger() {
        var result = cbor_load_result()
        let bytes: [UInt8] = [0x18, 0x2A]   // unsigned(42)
        let item = bytes.withUnsafeBufferPointer { cbor_load($0.baseAddress, 2, &result) }
        #expect(item != nil)
        var owned: UnsafeMutablePointer<cbor_item_t>? = item
        if let item { #expect(cbor_get_int(item) == 42) }
        cbor_decref(&owned)
    }

    @Test func nghttp2ReportsAVersion() {
        let info = nghttp2_version(0)
        #expect(info != nil && info!.pointee.version_num > 0)
    }

    @Test func libyamlReportsAVersion() {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        yaml_get_version(&major, &minor, &patch)
        #expect(major == 0 && minor >= 2)
    }

    @Test func hiredisBuildsACommand() {
        // redisFormatCommandArgv needs no server: it only encodes RESP.
        var target: UnsafeMutablePointer<CChar>?
        let args = ["PING"]
        var pointers = args.map { UnsafePointer(strdup($0)) }
        defer { pointers.forEach { free(UnsafeMutableRawPointer(mutating: $0)) } }
        let n = pointers.withUnsafeMutableBufferPointer { buf in
            redisFormatCommandArgv(&target, 1, buf.baseAddress, nil)
        }
        #expect(n == 14)   // "*1\r\n$4\r\nPING\r\n"
        redisFreeCommand(target)
    }

    @Test func sqliteOpensAnInMemoryDatabase() {
        var db: OpaquePointer?
        #expect(sqlite3_open(":memory:", &db) == SQLITE_OK)
        sqlite3_close(db)
    }

    @Test func libcurlReportsAVersion() {
        let v = curl_version_info(CURLversion(rawValue: UInt32(CURLVERSION_TENTH.rawValue)))
        #expect(v != nil && v!.pointee.version_num > 0)
    }

    @Test func epollShimCreatesADescriptor() {
        let fd = CGateway_epollCreate()
        #expect(fd >= 0)
        close(fd)
    }
}
