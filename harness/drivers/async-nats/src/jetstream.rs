//! jetstream_create and jetstream_delete through async-nats's jetstream `Context`
//! (create_stream, create_consumer_on_stream, create_key_value, create_object_store). The crate
//! checks names before it sends (EmptyStreamName, InvalidStreamName, InvalidName,
//! InvalidStoreName): `refused`; the server's API errors (`jetstream::Error`) are `protocol`.

use std::error::Error as StdError;
use std::fmt::Display;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy};
use async_nats::jetstream::context::{
    CreateKeyValueError, CreateKeyValueErrorKind, CreateStreamError, CreateStreamErrorKind,
    RequestError, RequestErrorKind,
};
use async_nats::jetstream::stream::{ConsumerError, ConsumerErrorKind};
use async_nats::jetstream::{self, kv, object_store, stream, Context};
use async_nats::Client;
use serde_json::{json, Value};

use crate::{arg_str, fail, opt_str, Failure};

/// How long the crate waits for a JetStream API answer.
const WAIT: Duration = Duration::from_secs(5);

fn context(client: &Client) -> Context {
    let mut js = jetstream::new(client.clone());
    js.set_timeout(WAIT);
    js
}

/// The server's API error; its text carries the description and both codes.
fn api_failure(err: &jetstream::Error) -> Failure {
    fail("protocol", err)
}

fn other(err: impl Display) -> Failure {
    fail("other", err)
}

/// What else went wrong: a failed API request somewhere in `err`'s chain, typed by its kind (the
/// crate's own subject check refuses a name that cannot be a token of the request subject,
/// before sending), or `other`.
fn unlisted(err: &(dyn StdError + 'static)) -> Failure {
    let mut next = Some(err);
    while let Some(current) = next {
        if let Some(request) = current.downcast_ref::<RequestError>() {
            return match request.kind() {
                RequestErrorKind::InvalidSubject => fail("refused", err),
                RequestErrorKind::NoResponders => fail("no_responders", err),
                RequestErrorKind::TimedOut => fail("timeout", err),
                RequestErrorKind::Other => other(err),
            };
        }
        next = current.source();
    }
    other(err)
}

fn stream_failure(err: &CreateStreamError) -> Failure {
    match err.kind() {
        CreateStreamErrorKind::EmptyStreamName | CreateStreamErrorKind::InvalidStreamName => {
            fail("refused", err)
        }
        CreateStreamErrorKind::JetStream(api) => api_failure(&api),
        CreateStreamErrorKind::TimedOut => fail("timeout", err),
        CreateStreamErrorKind::JetStreamUnavailable => fail("no_responders", err),
        _ => unlisted(err),
    }
}

fn consumer_failure(err: &ConsumerError) -> Failure {
    match err.kind() {
        ConsumerErrorKind::InvalidName => fail("refused", err),
        ConsumerErrorKind::JetStream(api) => api_failure(&api),
        ConsumerErrorKind::TimedOut => fail("timeout", err),
        _ => unlisted(err),
    }
}

/// A key-value or object store creation error; a failed stream creation is its source.
fn bucket_failure(err: &CreateKeyValueError) -> Failure {
    match err.kind() {
        CreateKeyValueErrorKind::InvalidStoreName => fail("refused", err),
        CreateKeyValueErrorKind::TimedOut => fail("timeout", err),
        CreateKeyValueErrorKind::BucketCreate => std::error::Error::source(err)
            .and_then(|source| source.downcast_ref::<CreateStreamError>())
            .map_or_else(|| unlisted(err), stream_failure),
        _ => unlisted(err),
    }
}

fn subjects(req: &Value) -> Vec<String> {
    req.get("subjects")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) async fn create(client: &Client, req: &Value) -> Result<Value, Failure> {
    let js = context(client);
    let kind = arg_str(req, "kind")?;
    let name = arg_str(req, "name")?.to_string();
    let created = match kind {
        "stream" => {
            let config = stream::Config {
                name,
                subjects: subjects(req),
                ..Default::default()
            };
            let made = js
                .create_stream(config)
                .await
                .map_err(|e| stream_failure(&e))?;
            made.cached_info().config.name.clone()
        }
        "consumer" | "durable" => {
            let mut config = pull::Config {
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            };
            if kind == "consumer" {
                config.name = Some(name);
            } else {
                config.durable_name = Some(name);
            }
            let stream = opt_str(req, "stream")?.unwrap_or_default();
            let consumer = js
                .create_consumer_on_stream(config, stream)
                .await
                .map_err(|e| consumer_failure(&e))?;
            consumer.cached_info().name.clone()
        }
        "kv" => {
            let config = kv::Config {
                bucket: name,
                ..Default::default()
            };
            js.create_key_value(config)
                .await
                .map_err(|e| bucket_failure(&e))?
                .name
        }
        "object_store" => {
            let config = object_store::Config {
                bucket: name.clone(),
                ..Default::default()
            };
            js.create_object_store(config)
                .await
                .map_err(|e| bucket_failure(&e))?;
            // ObjectStore keeps its name crate-private: the bucket is looked up by name instead.
            js.get_object_store(&name).await.map_err(other)?;
            name
        }
        other => return Err(fail("invalid", format!("unknown kind `{other}`"))),
    };
    Ok(json!({ "created": created }))
}

pub(crate) async fn delete(client: &Client, req: &Value) -> Result<Value, Failure> {
    let js = context(client);
    let name = arg_str(req, "name")?;
    match arg_str(req, "kind")? {
        "stream" => drop(js.delete_stream(name).await.map_err(other)?),
        "consumer" | "durable" => {
            let stream = opt_str(req, "stream")?.unwrap_or_default();
            drop(
                js.delete_consumer_from_stream(name, stream)
                    .await
                    .map_err(other)?,
            )
        }
        "kv" => drop(js.delete_key_value(name).await.map_err(other)?),
        "object_store" => js.delete_object_store(name).await.map_err(other)?,
        other => return Err(fail("invalid", format!("unknown kind `{other}`"))),
    }
    Ok(json!({}))
}
