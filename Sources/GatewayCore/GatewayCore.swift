/// GatewayCore: the shared nouns of attest-gateway (byte buffers, durations, sizes) used by every layer above.
public enum GatewayCore {
    /// The product version printed by `attest-gateway version`.
    public static let version = "0.1.0"
}
