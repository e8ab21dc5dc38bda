//! The headers every call of the client carries beside its signature,
//! written once per client instead of once per call.
//!
//! The SDK builds three headers on every call, each by an interceptor of its
//! own: the user agent (`user-agent` and `x-amz-user-agent`, read from the
//! environment and formatted again for every request), an invocation id
//! (`amz-sdk-invocation-id`, a random UUID) and the attempt's number
//! (`amz-sdk-request: attempt=1; max=1`). Together they cost a
//! `BatchWriteItem` call about a tenth of the SDK's own work beside the
//! signature's hash. [`FixedHeaders`] turns those three interceptors off for
//! the calls of our client and writes the user agent it built when the
//! client was made. The other two are the SDK's telemetry of its own retry
//! loop, which our client does not use (the writer owns every retry), and
//! neither is needed by DynamoDB. What the user agent loses is its list of
//! per-call feature codes (`m/…`) and the HTTP client's name (`md/…`): the
//! SDK's name and version, the API's, the OS, the language, the execution
//! environment and an app id (`AWS_SDK_UA_APP_ID`) are all kept.

use aws_runtime::invocation_id::InvocationIdInterceptor;
use aws_runtime::request_info::RequestInfoInterceptor;
use aws_runtime::user_agent::{ApiMetadata, AwsUserAgent, UserAgentInterceptor};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
};
use aws_smithy_runtime_api::client::interceptors::{disable_interceptor, Intercept};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_types::app_name::AppName;
use aws_types::os_shim_internal::Env;

/// The client's fixed headers: see the module's documentation.
#[derive(Debug, Clone)]
pub struct FixedHeaders {
    user_agent: String,
    x_amz_user_agent: String,
}

/// `value` made a valid header value: a byte that is not becomes `_`
/// (the SDK's request headers refuse such a value by panicking).
pub(crate) fn header_safe(value: String) -> String {
    value
        .chars()
        .map(|c| match c {
            ' ' | '\t' | '!'..='~' => c,
            _ => '_',
        })
        .collect()
}

impl FixedHeaders {
    /// The headers of a DynamoDB client in this process's environment,
    /// with the app id of its configuration, if one is set.
    pub fn new(app_name: Option<&AppName>) -> Self {
        let api = ApiMetadata::new("dynamodb", aws_sdk_dynamodb::meta::PKG_VERSION);
        let mut agent = AwsUserAgent::new_from_environment(Env::real(), api);
        if let Some(app) = app_name {
            agent.set_app_name(app.clone());
        }
        FixedHeaders {
            user_agent: header_safe(agent.ua_header()),
            x_amz_user_agent: header_safe(agent.aws_ua_header()),
        }
    }

    /// The `user-agent` header's value.
    pub fn user_agent(&self) -> &str {
        &self.user_agent
    }

    /// The `x-amz-user-agent` header's value.
    pub fn x_amz_user_agent(&self) -> &str {
        &self.x_amz_user_agent
    }
}

impl Intercept for FixedHeaders {
    fn name(&self) -> &'static str {
        "sql2ddb::FixedHeaders"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Each of the three runs first after serialisation, so turning
        // them off here, at the call's first hook, skips all of their work.
        let state = cfg.interceptor_state();
        state.store_put(disable_interceptor::<UserAgentInterceptor>(
            "sql2ddb writes the user agent it built with the client",
        ));
        state.store_put(disable_interceptor::<InvocationIdInterceptor>(
            "the SDK's retries are off: every call is one attempt",
        ));
        state.store_put(disable_interceptor::<RequestInfoInterceptor>(
            "the SDK's retries are off: every call is one attempt",
        ));
        Ok(())
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let headers = context.request_mut().headers_mut();
        // Owned copies: a `String` becomes the header's bytes as it is; a
        // `&'static str` goes through a slower check (about 3,100
        // instructions a call for both headers, against 2,000).
        headers.insert("user-agent", self.user_agent.clone());
        headers.insert("x-amz-user-agent", self.x_amz_user_agent.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_made_valid() {
        assert_eq!(
            header_safe("app/x\r\nInjected: 1 é".to_string()),
            "app/x__Injected: 1 _"
        );
        let plain = "aws-sdk-rust/1 ua/2.1\tapi/dynamodb/1";
        assert_eq!(header_safe(plain.to_string()), plain);
    }

    #[test]
    fn the_user_agent_names_the_api_and_the_app() {
        let fixed = FixedHeaders::new(Some(&AppName::new("my-migration").unwrap()));
        for header in [fixed.user_agent(), fixed.x_amz_user_agent()] {
            let parts: Vec<&str> = header.split(' ').collect();
            assert!(
                parts.contains(
                    &format!("api/dynamodb/{}", aws_sdk_dynamodb::meta::PKG_VERSION).as_str()
                ),
                "{header}"
            );
            assert!(parts.contains(&"app/my-migration"), "{header}");
        }
        let plain = FixedHeaders::new(None);
        assert!(
            !plain.user_agent().contains("app/"),
            "{}",
            plain.user_agent()
        );
    }
}
