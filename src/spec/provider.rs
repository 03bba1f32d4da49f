//! Flagger's `spec.provider` strings, mapped to the routes sluice writes.
//!
//! A provider sluice cannot route is an error, never a silent fallback (Flagger's factory
//! falls back to Istio on a typo).

use crate::spec::model::{GatewayVersion, SmiVersion};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Gateway(GatewayVersion),
    Smi(SmiVersion),
}

impl Provider {
    /// The canonical provider string (as Flagger spells it).
    pub fn name(self) -> &'static str {
        match self {
            Provider::Gateway(GatewayVersion::V1) => "gatewayapi:v1",
            Provider::Gateway(GatewayVersion::V1beta1) => "gatewayapi:v1beta1",
            Provider::Smi(SmiVersion::V1alpha1) => "smi:v1alpha1",
            Provider::Smi(SmiVersion::V1alpha2) => "smi:v1alpha2",
            Provider::Smi(SmiVersion::V1alpha3) => "smi:v1alpha3",
            Provider::Smi(SmiVersion::V1alpha4) => "smi:v1alpha4",
        }
    }
}

/// Maps a provider string; the error lists what is supported.
pub fn parse_provider(text: &str) -> Result<Provider, String> {
    let supported = "supported: osm, linkerd, smi:v1alpha1, smi:v1alpha2, smi:v1alpha3, smi:v1alpha4, gatewayapi:v1, gatewayapi:v1beta1";
    match text {
        "osm" | "smi:v1alpha2" => Ok(Provider::Smi(SmiVersion::V1alpha2)),
        "linkerd" | "smi:v1alpha1" | "smi" => Ok(Provider::Smi(SmiVersion::V1alpha1)),
        "smi:v1alpha3" => Ok(Provider::Smi(SmiVersion::V1alpha3)),
        "smi:v1alpha4" => Ok(Provider::Smi(SmiVersion::V1alpha4)),
        "gatewayapi:v1" => Ok(Provider::Gateway(GatewayVersion::V1)),
        "gatewayapi:v1beta1" => Ok(Provider::Gateway(GatewayVersion::V1beta1)),
        "gatewayapi" => Err(format!(
            "expected a Gateway API version (gatewayapi:v1 or gatewayapi:v1beta1), found a bare \"gatewayapi\"; {supported}"
        )),
        other => Err(format!(
            "sluice does not route provider {other:?} (it writes SMI TrafficSplit or Gateway API HTTPRoute); {supported}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_map_like_flagger() {
        assert_eq!(
            parse_provider("osm"),
            Ok(Provider::Smi(SmiVersion::V1alpha2))
        );
        assert_eq!(
            parse_provider("linkerd"),
            Ok(Provider::Smi(SmiVersion::V1alpha1))
        );
        assert_eq!(
            parse_provider("smi:v1alpha3"),
            Ok(Provider::Smi(SmiVersion::V1alpha3))
        );
        assert_eq!(
            parse_provider("gatewayapi:v1beta1"),
            Ok(Provider::Gateway(GatewayVersion::V1beta1))
        );
        assert!(parse_provider("gatewayapi").unwrap_err().contains("bare"));
        assert!(parse_provider("istio")
            .unwrap_err()
            .contains("does not route"));
        assert!(parse_provider("nginx").is_err());
    }
}
