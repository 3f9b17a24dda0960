internal import CCurl

/// One libcurl easy handle and the C memory that must live as long as it: the request header list and the
/// error buffer. Everything is freed in `deinit`, in the order libcurl requires (handle first).
///
/// Confined to the thread that performs the transfer; one handle per call.
final class CurlEasyHandle {
    private let raw: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init?() {
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        _ = CGatewayCurl_setoptPointer(raw, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer))
    }

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    func set(_ option: CURLoption, _ value: Int) throws(HTTPClientError) {
        try check(CGatewayCurl_setoptLong(raw, option, value), option)
    }

    func set(_ option: CURLoption, offT value: Int) throws(HTTPClientError) {
        try check(CGatewayCurl_setoptOffT(raw, option, curl_off_t(value)), option)
    }

    /// libcurl copies string options, so the Swift string need not outlive the call.
    func set(_ option: CURLoption, _ value: String) throws(HTTPClientError) {
        try check(CGatewayCurl_setoptString(raw, option, value), option)
    }

    /// Makes the request a POST of `body`; libcurl copies the bytes (binary-safe: the size is set first).
    func setPostBody(_ body: [UInt8]) throws(HTTPClientError) {
        try set(CURLOPT_POST, 1)
        try set(CURLOPT_POSTFIELDSIZE_LARGE, offT: body.count)
        let rc = body.withUnsafeBytes { bytes -> CURLcode in
            var empty: CChar = 0
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return CGatewayCurl_setoptPointer(raw, CURLOPT_COPYPOSTFIELDS, &empty)
            }
            return CGatewayCurl_setoptPointer(raw, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: base))
        }
        try check(rc, CURLOPT_COPYPOSTFIELDS)
    }

    /// Sets the body callback and the header callback, both receiving `sink`, which the caller keeps alive
    /// until `perform` returns.
    func setCallbacks(_ sink: CurlTransferSink) throws(HTTPClientError) {
        let userdata = Unmanaged.passUnretained(sink).toOpaque()
        try check(CGatewayCurl_setoptWriteFunction(raw, CURLOPT_WRITEFUNCTION, curlWriteBody), CURLOPT_WRITEFUNCTION)
        try check(CGatewayCurl_setoptPointer(raw, CURLOPT_WRITEDATA, userdata), CURLOPT_WRITEDATA)
        try check(CGatewayCurl_setoptWriteFunction(raw, CURLOPT_HEADERFUNCTION, curlWriteHeader), CURLOPT_HEADERFUNCTION)
        try check(CGatewayCurl_setoptPointer(raw, CURLOPT_HEADERDATA, userdata), CURLOPT_HEADERDATA)
    }

    /// Sets the request header fields; the list is owned here and freed in `deinit`.
    func setHeaders(_ lines: [String]) throws(HTTPClientError) {
        for line in lines {
            guard let appended = curl_slist_append(headerList, line) else {
                throw .invalidRequest("curl_slist_append failed")
            }
            headerList = appended
        }
        try check(CGatewayCurl_setoptPointer(raw, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList)),
                  CURLOPT_HTTPHEADER)
    }

    /// Runs the transfer to completion (blocking) and returns libcurl's result code.
    func perform() -> CURLcode { curl_easy_perform(raw) }

    /// The status code of the last response received, or 0.
    var responseCode: Int {
        var code = 0
        _ = CGatewayCurl_getinfoLong(raw, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// libcurl's detailed message for the last failure, falling back to the generic text for `code`.
    func errorDetail(_ code: CURLcode) -> String {
        let detail = String(cString: errorBuffer)
        return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }

    private func check(_ rc: CURLcode, _ option: CURLoption) throws(HTTPClientError) {
        guard rc == CURLE_OK else {
            throw .invalidRequest("curl option \(option.rawValue): \(String(cString: curl_easy_strerror(rc)))")
        }
    }
}

/// libcurl's body callback: returning fewer bytes than offered aborts the transfer with CURLE_WRITE_ERROR.
private func curlWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                           _ userdata: UnsafeMutableRawPointer?) -> Int {
    let n = size * count
    guard let userdata else { return 0 }
    let sink = Unmanaged<CurlTransferSink>.fromOpaque(userdata).takeUnretainedValue()
    return sink.appendBody(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
}

/// libcurl's header callback: called once per complete header line, status lines included.
private func curlWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                             _ userdata: UnsafeMutableRawPointer?) -> Int {
    let n = size * count
    guard let userdata else { return 0 }
    let sink = Unmanaged<CurlTransferSink>.fromOpaque(userdata).takeUnretainedValue()
    sink.appendHeaderLine(UnsafeRawBufferPointer(start: data, count: n))
    return n
}
