/// Why a message was rejected. Every rejection is terminal: the caller answers with `status` and closes the
/// connection, because after a framing doubt the position of the next message on the wire is unknown.
///
/// For errors returned by ``HTTP1ResponseParser`` the gateway answers its client 502 whatever `status` says;
/// `status` is the answer to a peer that sent a bad *request*.
public struct HTTP1ParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The closed list of rejection reasons. The raw value is the reason code put in JSON error bodies.
    public enum Code: String, Sendable, CaseIterable {
        case malformedRequestLine = "malformed_request_line", malformedStatusLine = "malformed_status_line"
        /// An `HTTP/x.y` version other than 1.0 or 1.1 (505).
        case unsupportedVersion = "unsupported_version"
        /// The request-target is longer than `maxTargetBytes` (414).
        case targetTooLong = "target_too_long"
        /// The head is longer than `maxHeaderBytes` (431).
        case headerTooLarge = "header_too_large"
        /// More field lines than `maxHeaders` (431).
        case tooManyHeaders = "too_many_headers"
        case invalidHeaderName = "invalid_header_name", invalidHeaderValue = "invalid_header_value"
        case whitespaceBeforeColon = "whitespace_before_colon", obsFold = "obs_fold", bareCR = "bare_cr"
        /// A line ended by LF without CR.
        case bareLF = "bare_lf"
        case contentLengthWithTransferEncoding = "content_length_with_transfer_encoding"
        case conflictingContentLength = "conflicting_content_length", invalidContentLength = "invalid_content_length"
        /// Any request Transfer-Encoding other than exactly `chunked` (501).
        case unsupportedTransferEncoding = "unsupported_transfer_encoding"
        /// Transfer-Encoding in an HTTP/1.0 message, whose framing RFC 9112 6.1 tells us to distrust (400).
        case transferEncodingOnHTTP10 = "transfer_encoding_on_http10"
        case badChunkSize = "bad_chunk_size", badChunkTerminator = "bad_chunk_terminator", badTrailer = "bad_trailer"
        case missingHost = "missing_host", multipleHost = "multiple_host"
        /// A Host value with bytes that cannot appear in `uri-host [ ":" port ]`.
        case invalidHost = "invalid_host"
        case invalidMethod = "invalid_method"
        /// A request-target that is not origin-, absolute-, authority- (CONNECT) or asterisk-form (OPTIONS).
        case invalidTarget = "invalid_target"
        /// The peer closed in the middle of a head or of a Content-Length / chunked body.
        case truncatedMessage = "truncated_message"
        /// Response bytes arrived while no response was expected (see ``HTTP1ResponseParser/expectResponse(toHEAD:)``).
        case unsolicitedResponse = "unsolicited_response"
    }

    /// The reason.
    public let code: Code

    /// Creates an error for `code`.
    public init(_ code: Code) { self.code = code }

    /// The HTTP status to answer a client whose request was rejected for this reason.
    public var status: Int {
        switch code {
        case .unsupportedVersion: return 505
        case .targetTooLong: return 414
        case .headerTooLarge, .tooManyHeaders: return 431
        case .unsupportedTransferEncoding: return 501
        default: return 400
        }
    }

    /// `reason_code (status)`, for logs.
    public var description: String { "\(code.rawValue) (\(status))" }
}
