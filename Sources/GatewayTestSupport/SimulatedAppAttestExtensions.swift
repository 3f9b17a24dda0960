import CBOR

/// The authenticator-data extensions newer iOS versions (27+) append after the COSE key, and after the counter of
/// an assertion, as one CBOR map — **without** setting the ED flag, as Apple's own sample does.
public struct SimulatedAppAttestExtensions: Sendable, Equatable {
    /// `apple_validation_category_01`, a byte string (Apple's sample: `01 00 00 00`).
    public var validationCategory: [UInt8]?
    /// `apple_bundle_version_01`, text (the app's CFBundleVersion).
    public var bundleVersion: String?

    public init(validationCategory: [UInt8]? = nil, bundleVersion: String? = nil) {
        self.validationCategory = validationCategory
        self.bundleVersion = bundleVersion
    }

    /// No extensions: the authenticator data of iOS 14–26.
    public static let none = SimulatedAppAttestExtensions()

    /// A category number as the 4-byte little-endian value Apple's sample carries: 1 → `01 00 00 00`.
    /// (Apple has not documented the encoding; little-endian is read off that one sample.)
    public static func validationCategory(_ number: UInt32) -> [UInt8] {
        withUnsafeBytes(of: number.littleEndian) { Array($0) }
    }

    /// The map to append, keys in the sample's order; nil when there is nothing to append.
    var cborMap: CBORValue? {
        var entries: [(CBORValue, CBORValue)] = []
        if let bundleVersion { entries.append((.text("apple_bundle_version_01"), .text(bundleVersion))) }
        if let validationCategory { entries.append((.text("apple_validation_category_01"), .bytes(validationCategory))) }
        return entries.isEmpty ? nil : .map(entries)
    }
}
