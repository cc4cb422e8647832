//! The working context of the parent state: options plus messages, kept as sealed segments
//! (one per Step that appended, [`crate::kernel::segment`]) and the tail appended by the Step
//! in progress.
//!
//! Why segments: the context only grows by appending (a context reducer's replacement starts
//! a new list), so a Step that appends k messages validates, encodes and hashes those k
//! messages once, when it seals them, and shares every older segment by `Arc` with the
//! snapshot, the restored instance, the committed record and the model call's request.
//!
//! In the state's payload the context is only its head, `{"chain":Digest,"messages":N,
//! "options"?:Options}`: the chain digest over the segments' digests and the message count,
//! so a restore refuses lost, reordered, added or changed segments. The full wire form of
//! [`super::ParentState`] (tests, fuzzing) still writes the messages inline as a request.

use crate::chat::{ChatError, Message, Options, Request, Role};
use crate::json::{DecodeError, Digest, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::segment::{self, Segment};
use std::sync::Arc;

/// One sealed segment: its messages with their shape (decoded once, shared) and the segment.
#[derive(Clone)]
struct Part {
    sealed: Arc<SealedMessages>,
    segment: Arc<Segment>,
}

/// The decoded form a context segment carries ([`Segment::decoded`]): its messages and where
/// their system messages sit. The shape is computed once, when the segment is sealed or first
/// parsed, so a restore (every Step) attaches old segments in O(segments), never walking their
/// messages again.
pub(crate) struct SealedMessages {
    messages: Vec<Message>,
    shape: Shape,
}

impl SealedMessages {
    fn new(messages: Vec<Message>) -> SealedMessages {
        let shape = Shape::of(&messages);
        SealedMessages { messages, shape }
    }
}

/// Where the system messages of a run of messages are (for the leading-prefix rule).
#[derive(Clone, Copy, Default)]
struct Shape {
    first_system: Option<usize>,
    first_other: Option<usize>,
    /// A system message after a non-system one, inside this run.
    system_after_other: Option<usize>,
}

impl Shape {
    fn of(messages: &[Message]) -> Shape {
        let mut shape = Shape::default();
        for (i, m) in messages.iter().enumerate() {
            if m.role == Role::System {
                shape.first_system.get_or_insert(i);
                if shape.first_other.is_some() && shape.system_after_other.is_none() {
                    shape.system_after_other = Some(i);
                }
            } else {
                shape.first_other.get_or_insert(i);
            }
        }
        shape
    }
}

/// The working context: options and the messages in order.
#[derive(Clone, Default)]
pub struct WorkingContext {
    pub options: Options,
    parts: Vec<Part>,
    /// Appended since the last seal (validated and encoded when sealed).
    tail: Vec<Message>,
    sealed_messages: usize,
    sealed_bytes: u64,
    /// The chain digest over `parts`, kept as segments are pushed (`None`: no segment yet,
    /// the chain's start), so naming the context (every snapshot and model call) hashes
    /// nothing.
    chain: Option<Digest>,
}

/// The context as the state's payload names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextHead {
    pub chain: Digest,
    pub messages: u64,
    pub options: Options,
}

impl WorkingContext {
    /// A context of `messages` (unsealed) and `options`.
    pub fn new(messages: Vec<Message>, options: Options) -> WorkingContext {
        WorkingContext { options, tail: messages, ..WorkingContext::default() }
    }

    /// The messages and options of `request` (its tools are not part of a context).
    pub fn from_request(request: &Request) -> WorkingContext {
        WorkingContext::new(request.messages.clone(), request.options.clone())
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.sealed_messages + self.tail.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every message in order.
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = &Message> + '_ {
        self.parts.iter().flat_map(|p| p.sealed.messages.iter()).chain(self.tail.iter())
    }

    /// An owned copy of every message (O(context): for model requests and hosts, never a Step).
    pub fn to_messages(&self) -> Vec<Message> {
        self.messages().cloned().collect()
    }

    /// The request these messages and options make (no tools).
    pub fn to_request(&self) -> Request {
        Request { messages: self.to_messages(), options: self.options.clone(), ..Request::default() }
    }

    pub fn last(&self) -> Option<&Message> {
        self.messages().next_back()
    }

    pub fn push(&mut self, message: Message) {
        self.tail.push(message);
    }

    pub fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        self.tail.extend(messages);
    }

    /// Replaces every message (a context reducer's result): the segment list starts again.
    pub fn replace(&mut self, messages: Vec<Message>) {
        self.parts.clear();
        self.sealed_messages = 0;
        self.sealed_bytes = 0;
        self.chain = None;
        self.tail = messages;
    }

    /// The rules of a request's messages and options: at least one message, every message
    /// valid, system messages only in the leading prefix. Sealed segments were validated
    /// when sealed or read, so this costs O(segments + unsealed messages).
    pub fn validate(&self) -> Result<(), ChatError> {
        if self.is_empty() {
            return Err(ChatError::NoMessages);
        }
        let offset = self.sealed_messages;
        for (i, m) in self.tail.iter().enumerate() {
            m.validate().map_err(|e| ChatError::in_message(offset + i, e))?;
        }
        self.options.validate()?;
        let mut offset = 0;
        let mut seen_other = false;
        let tail = Shape::of(&self.tail);
        let shapes = self.parts.iter().map(|p| (p.sealed.shape, p.sealed.messages.len())).chain([(tail, self.tail.len())]);
        for (shape, len) in shapes {
            let misplaced = if seen_other { shape.first_system } else { shape.system_after_other };
            if let Some(i) = misplaced {
                return Err(ChatError::SystemNotInPrefix { index: offset + i });
            }
            seen_other |= shape.first_other.is_some();
            offset += len;
        }
        Ok(())
    }

    /// Seals the unsealed messages into one segment: validates each, encodes them once and
    /// hashes the bytes once. A no-op when nothing was appended.
    pub fn seal(&mut self) -> Result<(), ChatError> {
        if self.tail.is_empty() {
            return Ok(());
        }
        let offset = self.sealed_messages;
        for (i, m) in self.tail.iter().enumerate() {
            m.validate().map_err(|e| ChatError::in_message(offset + i, e))?;
        }
        let messages = std::mem::take(&mut self.tail);
        let text = Json::Array(messages.iter().map(ToJson::to_json).collect()).to_canonical_string();
        let sealed = Arc::new(SealedMessages::new(messages));
        let segment = Segment::with_decoded(text, sealed.clone());
        let chain = segment::chain_extend(self.chain(), std::slice::from_ref(&segment));
        self.push_part(sealed, segment, chain);
        Ok(())
    }

    /// Appends a sealed segment; `chain` is the chain digest with it.
    fn push_part(&mut self, sealed: Arc<SealedMessages>, segment: Arc<Segment>, chain: Digest) {
        self.chain = Some(chain);
        self.sealed_messages += sealed.messages.len();
        self.sealed_bytes = self.sealed_bytes.saturating_add(segment.len() as u64);
        self.parts.push(Part { sealed, segment });
    }

    /// Whether every message is sealed.
    pub fn is_sealed(&self) -> bool {
        self.tail.is_empty()
    }

    /// The number of sealed segments.
    pub(crate) fn segment_count(&self) -> usize {
        self.parts.len()
    }

    /// The sealed segments, in order, borrowed.
    pub(crate) fn segments_iter(&self) -> impl Iterator<Item = &Arc<Segment>> + '_ {
        self.parts.iter().map(|p| &p.segment)
    }

    /// The sealed segments, in order.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.parts.iter().map(|p| p.segment.clone()).collect()
    }

    /// Canonical bytes of the sealed segments (what [`crate::limits::DEFAULT_MAX_CONTEXT_BYTES`]
    /// bounds).
    pub fn sealed_bytes(&self) -> u64 {
        self.sealed_bytes
    }

    /// The chain digest over the sealed segments.
    pub fn chain(&self) -> Digest {
        let chain = self.chain.unwrap_or_else(segment::chain_start);
        #[cfg(test)]
        assert_eq!(chain, segment::chain_digest(&self.segments()), "the kept chain digest is the segments' own");
        chain
    }

    /// The head of a sealed context.
    pub fn head(&self) -> ContextHead {
        ContextHead { chain: self.chain(), messages: self.sealed_messages as u64, options: self.options.clone() }
    }

    /// Rebuilds a context from its head and segments: a segment that carries its decoded
    /// messages (the one this process sealed or read before) is reused as is, any other is
    /// parsed and every message validated once. The count and the chain must match.
    ///
    /// A segment that does not decode keeps the message codec's error kind (`UnknownMember`,
    /// `WrongType`, ...): its path names the segment and the message inside it
    /// (`$.segments[1][0].parts[0]`), so a caller matches the kind exactly as for the same
    /// fault in an inline context.
    pub fn attach(head: &ContextHead, segments: &[Arc<Segment>]) -> Result<WorkingContext, DecodeError> {
        let chain = segment::chain_digest(segments);
        if chain != head.chain {
            return Err(DecodeError::invalid(
                "the segments do not match the context's chain digest (lost, reordered, added or changed)",
            ));
        }
        let mut context = WorkingContext { options: head.options.clone(), ..WorkingContext::default() };
        let mut so_far = segment::chain_start();
        for (i, s) in segments.iter().enumerate() {
            let in_segment = |e: DecodeError| e.in_index(i).in_member("segments");
            let sealed = match s.decoded::<SealedMessages>() {
                Some(sealed) => sealed,
                None => {
                    let messages = parse_segment(s).map_err(in_segment)?;
                    let sealed = Arc::new(SealedMessages::new(messages));
                    s.remember(sealed).ok_or_else(|| in_segment(DecodeError::invalid("the segment holds another decoded form")))?
                }
            };
            if sealed.messages.is_empty() {
                return Err(in_segment(DecodeError::invalid("a segment holds at least one message")));
            }
            // Each segment remembers its link, so this repeats no hash.
            so_far = segment::chain_extend(so_far, std::slice::from_ref(s));
            context.push_part(sealed, s.clone(), so_far);
        }
        if context.sealed_messages as u64 != head.messages {
            return Err(DecodeError::invalid(format!(
                "the segments hold {} messages, the head names {}",
                context.sealed_messages, head.messages
            )));
        }
        Ok(context)
    }
}

/// The messages of one segment, decoded strictly: a failure keeps its kind, with the path
/// inside the segment (`$[2].parts[0]`: message 2).
fn parse_segment(s: &Segment) -> Result<Vec<Message>, DecodeError> {
    let limits = crate::json::ParseLimits { max_bytes: usize::MAX, ..Default::default() };
    let value = crate::json::parse_with(s.text().as_bytes(), &limits)?;
    let messages = Vec::<Message>::from_json(&value)?;
    for (i, m) in messages.iter().enumerate() {
        m.validate().map_err(|e| DecodeError::from(e).in_index(i))?;
    }
    Ok(messages)
}

impl PartialEq for WorkingContext {
    /// The same options and messages, however they are split into segments.
    fn eq(&self, other: &WorkingContext) -> bool {
        self.options == other.options && self.len() == other.len() && self.messages().eq(other.messages())
    }
}
impl Eq for WorkingContext {}

impl std::fmt::Debug for WorkingContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkingContext")
            .field("options", &self.options)
            .field("segments", &self.parts.len())
            .field("messages", &self.len())
            .field("unsealed", &self.tail.len())
            .finish()
    }
}

/// The full form (tests, fuzzing, hosts): the request these messages and options make.
impl ToJson for WorkingContext {
    fn to_json(&self) -> Json {
        self.to_request().to_json()
    }
}

impl FromJson for WorkingContext {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let request = Request::from_json(value)?;
        if !request.tools.is_empty() || request.tool_choice != crate::chat::ToolChoice::default() {
            return Err(DecodeError::invalid("working_context must not hold tool definitions"));
        }
        Ok(WorkingContext::from_request(&request))
    }
}

impl ToJson for ContextHead {
    fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().field("chain", &self.chain).field("messages", &self.messages);
        if self.options.is_default() { b } else { b.field("options", &self.options) }.build()
    }
}

impl FromJson for ContextHead {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let head = ContextHead {
            chain: r.required("chain")?,
            messages: r.required("messages")?,
            options: r.optional("options")?.unwrap_or_default(),
        };
        r.finish()?;
        if head.options.is_default() && value.as_object().is_some_and(|o| o.contains_key("options")) {
            return Err(DecodeError::invalid("default options are omitted").in_member("options"));
        }
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(batches: &[Vec<Message>]) -> WorkingContext {
        let mut c = WorkingContext::default();
        for b in batches {
            c.extend(b.iter().cloned());
            c.seal().unwrap();
        }
        c
    }

    #[test]
    fn sealing_appends_one_segment_per_seal_and_shares_the_older_ones() {
        let mut c = sealed(&[vec![Message::system("s"), Message::user("a")]]);
        let first = c.segments();
        c.push(Message::assistant("b"));
        c.push(Message::user("c"));
        assert!(!c.is_sealed());
        c.seal().unwrap();
        c.seal().unwrap();
        let now = c.segments();
        assert_eq!(now.len(), 2, "a seal with nothing appended adds nothing");
        assert!(Arc::ptr_eq(&first[0], &now[0]), "the older segment is shared, not re-encoded");
        assert_eq!(now[1].text(), Json::Array(vec![Message::assistant("b").to_json(), Message::user("c").to_json()]).to_canonical_string());
        assert_eq!(c.len(), 4);
        assert_eq!(c.sealed_bytes(), (now[0].len() + now[1].len()) as u64);
        assert_eq!(c.chain(), segment::chain_extend(segment::chain_digest(&first), &now[1..]));
    }

    #[test]
    fn attach_checks_count_and_chain_and_reuses_or_parses() {
        let c = sealed(&[vec![Message::user("a")], vec![Message::assistant("b"), Message::user("c")]]);
        let head = c.head();
        let again = WorkingContext::attach(&head, &c.segments()).unwrap();
        assert_eq!(again, c);
        // Freshly read segments (no decoded form) are parsed once, then remembered.
        let fresh: Vec<Arc<Segment>> = c.segments().iter().map(|s| Segment::from_canonical(s.text().to_owned())).collect();
        assert_eq!(WorkingContext::attach(&head, &fresh).unwrap(), c);
        assert!(fresh.iter().all(|s| s.decoded::<SealedMessages>().is_some()));
        let wrong_count = ContextHead { messages: 2, ..head.clone() };
        assert!(WorkingContext::attach(&wrong_count, &c.segments()).is_err());
        let mut reordered = c.segments();
        reordered.swap(0, 1);
        assert!(WorkingContext::attach(&head, &reordered).unwrap_err().to_string().contains("chain digest"));
        // A segment whose bytes are not messages is refused even under a matching chain.
        let junk = vec![Segment::from_canonical("[1]".to_owned())];
        let junk_head = ContextHead { chain: segment::chain_digest(&junk), messages: 1, options: Options::default() };
        assert!(WorkingContext::attach(&junk_head, &junk).is_err());
    }

    #[test]
    fn system_messages_stay_in_the_leading_prefix_across_segments() {
        let ok = sealed(&[vec![Message::system("a")], vec![Message::system("b"), Message::user("c")]]);
        assert!(ok.validate().is_ok());
        let late = sealed(&[vec![Message::user("a")], vec![Message::system("b")]]);
        assert_eq!(late.validate(), Err(ChatError::SystemNotInPrefix { index: 1 }));
        let mut tail = sealed(&[vec![Message::user("a")]]);
        tail.push(Message::system("b"));
        assert_eq!(tail.validate(), Err(ChatError::SystemNotInPrefix { index: 1 }));
        let inner = sealed(&[vec![Message::system("s")], vec![Message::user("a"), Message::system("b")]]);
        assert_eq!(inner.validate(), Err(ChatError::SystemNotInPrefix { index: 2 }));
        assert_eq!(WorkingContext::default().validate(), Err(ChatError::NoMessages));
    }

    #[test]
    fn the_kept_chain_is_the_chain_of_the_segments_after_every_change() {
        let mut c = WorkingContext::default();
        assert_eq!(c.chain(), segment::chain_digest(&[]));
        for round in 0..40u32 {
            match round % 7 {
                3 => c.replace(vec![Message::user(format!("summary {round}"))]),
                5 => {
                    // A restore from the head and the segments keeps the same chain.
                    c = WorkingContext::attach(&c.head(), &c.segments()).unwrap();
                }
                _ => {
                    for k in 0..=(round % 3) {
                        c.push(Message::user(format!("m {round} {k}")));
                    }
                }
            }
            c.seal().unwrap();
            assert_eq!(c.chain, Some(segment::chain_digest(&c.segments())), "round {round}");
            assert_eq!(c.head().chain, segment::chain_digest(&c.segments()));
        }
    }

    #[test]
    fn replacing_starts_a_new_segment_list() {
        let mut c = sealed(&[vec![Message::user("a")], vec![Message::assistant("b")]]);
        c.replace(vec![Message::user("summary")]);
        c.seal().unwrap();
        assert_eq!(c.segments().len(), 1);
        assert_eq!(c.to_messages(), vec![Message::user("summary")]);
    }
}
