//! Signing directory payloads given as raw JSON text, so a test states exactly what is signed.

use base64::Engine;
use ed25519_dalek::Signer;
use switchyard_adapters::failover::directory::SignedDirectory;

pub fn sign_raw(secret: &ed25519_dalek::SigningKey, payload: &str) -> Vec<u8> {
    let signature = secret.sign(payload.as_bytes());
    serde_json::to_vec(&SignedDirectory {
        payload: payload.to_owned(),
        signature: base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()),
    })
    .expect("serialize")
}
