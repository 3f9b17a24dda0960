/// Bounds applied before libcbor sees any input. App Attest objects are about 5–6 KiB with a dozen items,
/// so the defaults leave ample room while keeping hostile input cheap to reject.
public struct CBORDecoderLimits: Sendable, Equatable {
    /// Largest input accepted, in bytes. Longer input is rejected without being scanned.
    public var maxInputBytes: Int
    /// Deepest nesting accepted; a top-level scalar has depth 1, the items inside a top-level map depth 2.
    public var maxDepth: Int
    /// Most data items (counting every key, value, element and tagged item) in one decoded item.
    public var maxItems: Int

    public init(maxInputBytes: Int = 64 * 1024, maxDepth: Int = 16, maxItems: Int = 1024) {
        self.maxInputBytes = maxInputBytes
        self.maxDepth = maxDepth
        self.maxItems = maxItems
    }

    /// The defaults: 64 KiB, depth 16, 1024 items.
    public static let `default` = CBORDecoderLimits()
}
