import GatewayCrypto
import Attestation
import Foundation

/// A device saved in one directory: `device-key.pem` (the private key, mode 0600) and `device.json` (app identity,
/// environment, extensions and the last counter), so successive `attest-gateway-dev appattest` commands act as one
/// device.
extension SimulatedAppAttestDevice {
    static let keyFile = "device-key.pem"
    static let stateFile = "device.json"

    /// What `device.json` holds.
    private struct State: Codable {
        var teamId: String
        var bundleId: String
        var environment: String
        var counter: UInt32
        /// The bytes as a JSON array of numbers, or absent.
        var validationCategory: [UInt8]?
        var bundleVersion: String?
    }

    /// Whether `directory` holds a saved device.
    public static func exists(in directory: String) -> Bool {
        SimulatorFiles.exists(SimulatorFiles.path(directory, stateFile))
    }

    /// Writes the key and state into `directory` (created if needed). Call after every `assert` whose counter
    /// should survive (the CLI does).
    public func save(to directory: String) throws {
        try SimulatorFiles.createDirectory(directory)
        let state = State(
            teamId: teamID, bundleId: bundleID, environment: environment.rawValue, counter: counter,
            validationCategory: extensions.validationCategory, bundleVersion: extensions.bundleVersion)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let json = String(decoding: try encoder.encode(state), as: UTF8.self) + "\n"
        try SimulatorFiles.write(try key.pemPKCS8(), to: SimulatorFiles.path(directory, Self.keyFile), secret: true)
        // The state last: `exists(in:)` looks for it.
        try SimulatorFiles.write(json, to: SimulatorFiles.path(directory, Self.stateFile))
    }

    /// Reads a device written by `save(to:)`.
    public static func load(from directory: String) throws -> SimulatedAppAttestDevice {
        let statePath = SimulatorFiles.path(directory, stateFile)
        let state: State
        do {
            state = try JSONDecoder().decode(State.self, from: Data(try SimulatorFiles.read(statePath).utf8))
        } catch let error as SimulatorFiles.Failure {
            throw error
        } catch {
            throw SimulatorFiles.Failure(description: "\(statePath): \(error)")
        }
        guard let environment = AppAttestEnvironment(rawValue: state.environment) else {
            throw SimulatorFiles.Failure(description: "\(statePath): environment must be production or development")
        }
        let key = try ECPrivateKey(pem: try SimulatorFiles.read(SimulatorFiles.path(directory, keyFile)))
        return try SimulatedAppAttestDevice(
            key: key, teamID: state.teamId, bundleID: state.bundleId, environment: environment,
            extensions: SimulatedAppAttestExtensions(validationCategory: state.validationCategory, bundleVersion: state.bundleVersion),
            counter: state.counter)
    }
}
