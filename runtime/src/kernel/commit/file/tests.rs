use super::record::{Listed, LoggedCut};
use super::*;
use crate::json::Digest;
use crate::kernel::commit::cut::CutEntry;
use crate::kernel::commit::{CheckpointKind, EffectBoundaryKind, Installation, TreeCut};
use crate::kernel::ids::{EffectId, IncarnationId};
use std::io::Write;
use std::sync::Arc;
use crate::kernel::commit::conformance::check_committer;
use crate::kernel::commit::{audit_history, MemoryCommitter};
use futures::executor::block_on;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("keel-file-committer-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        TempDir(path)
    }
    fn log(&self) -> PathBuf {
        self.0.join(LOG_FILE_NAME)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A committer that owns its directory (fields drop in order: the file closes first).
struct TempStore {
    committer: FileCommitter,
    _dir: TempDir,
}

impl TempStore {
    fn new() -> TempStore {
        let dir = TempDir::new();
        TempStore { committer: FileCommitter::open(&dir.0).unwrap(), _dir: dir }
    }
}

impl Committer for TempStore {
    fn commit_checkpoint(&self, c: &Checkpoint) -> BoxFuture<'_, Result<(), CommitError>> {
        self.committer.commit_checkpoint(c)
    }
    fn commit_effect(&self, b: &EffectBoundary) -> BoxFuture<'_, Result<(), CommitError>> {
        self.committer.commit_effect(b)
    }
    fn activate_tree(&self, a: &Activation) -> BoxFuture<'_, Result<(), CommitError>> {
        self.committer.activate_tree(a)
    }
    fn load_tree(&self, root: &ProcessId) -> BoxFuture<'_, Result<Option<Head>, CommitError>> {
        self.committer.load_tree(root)
    }
}

fn root() -> ProcessId {
    ProcessId::parse("process:root").unwrap()
}
fn other_root() -> ProcessId {
    ProcessId::parse("process:other").unwrap()
}
fn inc(n: u8) -> IncarnationId {
    IncarnationId::from_hex(&format!("{n:032x}")).unwrap()
}
/// A keel-shaped whole cut whose records say which cut it is; its digest is the real tree
/// digest (replay recomputes and checks it).
fn cut_of(root: ProcessId, n: u8, incarnation: u8) -> TreeCut {
    let state = format!("cut {n} of writer {incarnation}");
    crate::kernel::commit::conformance::sample_cut(
        &root,
        &inc(incarnation),
        &[(root.as_str(), &state), ("process:kept", "unchanged")],
    )
}
/// The digest of `cut(n, incarnation)` of the root `c` belongs to.
fn digest_of(c: &TreeCut, n: u8, incarnation: u8) -> Digest {
    cut_of(c.root_id.clone(), n, incarnation).digest
}
/// The writer number `inc` was made from.
fn writer(c: &TreeCut) -> u8 {
    let hex = c.incarnation.as_str();
    u8::from_str_radix(&hex[hex.len() - 2..], 16).unwrap()
}
fn cut(n: u8, incarnation: u8) -> TreeCut {
    cut_of(root(), n, incarnation)
}
fn start(c: TreeCut) -> Checkpoint {
    Checkpoint { sequence: 1, kind: CheckpointKind::Start, previous_digest: None, cut: c }
}
fn progress(sequence: u64, previous: u8, c: TreeCut) -> Checkpoint {
    Checkpoint {
        sequence,
        kind: CheckpointKind::Progress,
        previous_digest: Some(digest_of(&c, previous, writer(&c))),
        cut: c,
    }
}
fn boundary(sequence: u64, kind: EffectBoundaryKind, previous: u8, c: TreeCut) -> EffectBoundary {
    EffectBoundary {
        sequence,
        kind,
        process_id: root(),
        effect_id: EffectId::derive(&root(), 1, 0),
        step_sequence: 1,
        batch_index: 0,
        effect_digest: Digest([200; 32]),
        settlement_digest: (kind != EffectBoundaryKind::Pending).then_some(Digest([201; 32])),
        previous_digest: digest_of(&c, previous, writer(&c)),
        cut: c,
    }
}
fn activation(previous_incarnation: u8, previous: u8, c: TreeCut) -> Activation {
    Activation {
        previous_incarnation: inc(previous_incarnation),
        previous_digest: digest_of(&c, previous, previous_incarnation),
        new_incarnation: c.incarnation.clone(),
        cut: c,
    }
}

/// Every kind of request, over two roots.
fn script() -> Vec<Request> {
    vec![
        Request::Checkpoint(start(cut(1, 1))),
        Request::Effect(boundary(2, EffectBoundaryKind::Pending, 1, cut(2, 1))),
        Request::Checkpoint(start(cut_of(other_root(), 50, 7))),
        Request::Effect(boundary(3, EffectBoundaryKind::Settled, 2, cut(3, 1))),
        Request::Activation(activation(1, 3, cut(4, 2))),
        Request::Effect(boundary(1, EffectBoundaryKind::Resolved, 4, cut(5, 2))),
        Request::Checkpoint(progress(2, 5, cut(6, 2))),
    ]
}

fn send<C: Committer>(c: &C, r: &Request) -> Result<(), CommitError> {
    block_on(async {
        match r {
            Request::Checkpoint(x) => c.commit_checkpoint(x).await,
            Request::Effect(x) => c.commit_effect(x).await,
            Request::Activation(x) => c.activate_tree(x).await,
        }
    })
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

/// Commits `requests` in a new store and returns the end of the log's frames after each one
/// (the file is cut to the last one when the committer drops).
fn populate(dir: &TempDir, requests: &[Request]) -> Vec<u64> {
    let f = FileCommitter::open(&dir.0).unwrap();
    requests
        .iter()
        .map(|r| {
            send(&f, r).unwrap();
            f.stats().log_bytes
        })
        .collect()
}

fn open_err(dir: &TempDir) -> OpenError {
    match FileCommitter::open(&dir.0) {
        Ok(_) => panic!("open succeeded"),
        Err(e) => e,
    }
}

fn flip(path: &Path, at: u64) {
    let mut bytes = fs::read(path).unwrap();
    let i = usize::try_from(at).unwrap();
    bytes[i] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

fn append_raw(path: &Path, meta: &[u8], blobs: &[u8]) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    write_frame(&mut f, &Record { meta: meta.to_vec(), blobs: vec![Arc::from(blobs)] }).unwrap();
}

/// The metadata and the concatenated blobs of the record a request would write over a tree
/// without a head (so every record is carried).
fn record_of(r: &Request, i: &Installation) -> (Vec<u8>, Vec<u8>) {
    listed_record(r, i, &LoggedCut::listing(r.cut(), r.cut(), None))
}

/// The same for a hand-made listing.
fn listed_record(r: &Request, i: &Installation, listing: &LoggedCut) -> (Vec<u8>, Vec<u8>) {
    let record = encode_record(r, listing, i);
    (record.meta, record.blobs.iter().flat_map(|b| b.iter().copied()).collect())
}

#[test]
fn file_committer_passes_conformance() {
    block_on(check_committer(TempStore::new)).unwrap();
}

#[test]
fn reopen_rebuilds_the_same_heads_and_history_as_the_reference() {
    let dir = TempDir::new();
    let memory = MemoryCommitter::new();
    {
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!(f.recovery(), &Recovery { created: true, records: 0, truncated_bytes: 0, torn_tail: None });
        for r in script() {
            send(&f, &r).unwrap();
            send(&f, &r).unwrap(); // retry while current: acknowledged, nothing appended
            send(&memory, &r).unwrap();
        }
    }
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.recovery(), &Recovery { created: false, records: 7, truncated_bytes: 0, torn_tail: None });
    assert_eq!(f.roots(), memory.roots());
    for r in [root(), other_root()] {
        assert_eq!(f.head(&r), memory.head(&r), "head of {r}");
        assert_eq!(f.history(&r), memory.history(&r), "history of {r}");
        audit_history(&f.history(&r)).unwrap();
        assert_eq!(block_on(f.load_tree(&r)).unwrap(), memory.head(&r));
    }
    // The cut bytes themselves survive, not just their digests.
    assert_eq!(f.head(&root()).unwrap().cut.bytes().unwrap(), cut(6, 2).bytes().unwrap());
}

#[test]
fn identical_retry_after_reopen_follows_the_only_while_current_rule() {
    let dir = TempDir::new();
    populate(&dir, &script());
    let f = FileCommitter::open(&dir.0).unwrap();
    let requests = script();
    let (last, historical) = requests.split_last().unwrap();
    send(&f, last).unwrap();
    for r in historical.iter().filter(|r| r.cut().root_id == root()) {
        let got = send(&f, r);
        assert!(
            matches!(
                got,
                Err(CommitError::CommitConflict { .. }
                    | CommitError::TreeIncarnationConflict { .. })
            ),
            "historical {r:?} after reopen: {got:?}"
        );
    }
    // The other root's only commit is still its head.
    send(&f, &requests[2]).unwrap();
    // Same identity, different content after reopen.
    let changed = Request::Checkpoint(progress(2, 5, cut(9, 2)));
    assert!(matches!(send(&f, &changed), Err(CommitError::CommitConflict { .. })));
    // The store continues from the replayed head and the next reopen includes it.
    send(&f, &Request::Checkpoint(progress(3, 6, cut(7, 2)))).unwrap();
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.head(&root()).unwrap().sequence, 3);
    assert_eq!(f.recovery().records, 8);
}

#[test]
fn torn_tail_is_truncated_at_every_length() {
    let dir = TempDir::new();
    let requests = script();
    let lens = populate(&dir, &requests);
    let full = fs::read(dir.log()).unwrap();
    let (good, torn_end) = (lens[5], lens[6]);
    let offsets: Vec<u64> =
        (good + 1..good + 64).chain((good + 64..torn_end).step_by(23)).collect();
    for at in offsets.into_iter().chain([torn_end - 1]) {
        fs::write(dir.log(), &full[..usize::try_from(at).unwrap()]).unwrap();
        let f = FileCommitter::open(&dir.0).unwrap();
        let recovery = f.recovery();
        assert_eq!((recovery.records, recovery.truncated_bytes), (6, at - good), "torn at {at}");
        let torn = recovery.torn_tail.as_ref().unwrap();
        assert_eq!((torn.offset, torn.bytes), (good, at - good), "torn at {at}");
        assert_eq!(file_len(&dir.log()), good, "the tail is cut off on disk");
        assert_eq!(f.head(&root()).unwrap().sequence, 1);
    }
    // After truncation the lost commit can be made again and lands cleanly.
    let f = FileCommitter::open(&dir.0).unwrap();
    send(&f, &requests[6]).unwrap();
    drop(f);
    assert_eq!(fs::read(dir.log()).unwrap(), full);
}

#[test]
fn garbage_tails_are_damage_unfinished_frames_are_cut_and_zero_tails_are_free_space() {
    let dir = TempDir::new();
    let lens = populate(&dir, &script()[..3]);
    let clean = fs::read(dir.log()).unwrap();
    // Not a frame keel writes (no record header, or one failing its check): damage, left as
    // found, whatever a writer or an inspection makes of it.
    for tail in [b"KEELREC\ngarbage after a magic".to_vec(), vec![0xff; 3], b"\0\0KEELREC\n".to_vec()] {
        let mut bytes = clean.clone();
        bytes.extend_from_slice(&tail);
        fs::write(dir.log(), &bytes).unwrap();
        for opened in [FileCommitter::open(&dir.0), FileCommitter::open_read_only(&dir.0, FileOptions::default())] {
            match opened {
                Err(OpenError::Corrupt { offset, reason }) => {
                    assert_eq!(offset, lens[2], "{tail:?}");
                    assert!(reason.contains("not an unfinished record") && reason.contains(&format!("truncate it to {offset} bytes")), "{reason}");
                }
                Err(e) => panic!("{tail:?}: {e}"),
                Ok(_) => panic!("{tail:?}: opened"),
            }
            assert_eq!(fs::read(dir.log()).unwrap(), bytes, "{tail:?}: left as found");
        }
    }
    // The start of a frame (a header prefix, or a whole header declaring more than the file
    // holds), then zeros: unfinished, cut with the zeros.
    let mut header_then_zeros = b"KEELREC\n".to_vec();
    header_then_zeros.resize(4096, 0);
    let mut whole_header = b"KEELREC\n".to_vec();
    whole_header.extend_from_slice(&100u64.to_le_bytes());
    whole_header.extend_from_slice(&header_check(100));
    whole_header.extend_from_slice(&[7u8; 40]);
    for tail in [b"KEE".to_vec(), header_then_zeros, whole_header] {
        let mut bytes = clean.clone();
        bytes.extend_from_slice(&tail);
        fs::write(dir.log(), &bytes).unwrap();
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!(f.recovery().records, 3);
        assert_eq!(f.recovery().truncated_bytes, to_u64(tail.len()), "{tail:?}");
        assert_eq!(file_len(&dir.log()), lens[2]);
    }
    // Free space written ahead: kept while open, nothing reported.
    let mut bytes = clean.clone();
    bytes.resize(clean.len() + 4096, 0);
    fs::write(dir.log(), &bytes).unwrap();
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!((f.recovery().truncated_bytes, f.recovery().torn_tail.as_ref()), (0, None));
    assert_eq!(file_len(&dir.log()), lens[2] + 4096);
    assert_eq!(f.stats().log_bytes, lens[2]);
    drop(f);
    assert_eq!(file_len(&dir.log()), lens[2], "a closed log is its frames");
}

#[test]
fn free_space_is_written_ahead_reused_and_survives_a_crash() {
    let dir = TempDir::new();
    let requests = script();
    let f = FileCommitter::open(&dir.0).unwrap();
    send(&f, &requests[0]).unwrap();
    let (first, allocated) = (f.stats().log_bytes, file_len(&dir.log()));
    assert!(allocated >= first + RESERVE_BYTES, "grown ahead: {first} of {allocated}");
    for r in &requests[1..6] {
        send(&f, r).unwrap();
    }
    let written = f.stats().log_bytes;
    assert_eq!(file_len(&dir.log()), allocated, "later frames land in the free space");
    // What a crash leaves: the frames, then zeros.
    let crashed = fs::read(dir.log()).unwrap();
    assert!(crashed[usize::try_from(written).unwrap()..].iter().all(|&b| b == 0));
    drop(f);
    assert_eq!(file_len(&dir.log()), written);
    fs::write(dir.log(), &crashed).unwrap();
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.recovery(), &Recovery { created: false, records: 6, truncated_bytes: 0, torn_tail: None });
    send(&f, &requests[6]).unwrap();
    assert_eq!(file_len(&dir.log()), allocated, "the free space is reused after reopening");
    let all = f.stats().log_bytes;
    drop(f);
    assert_eq!(FileCommitter::open(&dir.0).unwrap().recovery().records, 7);
    // A frame torn inside the free space (its first bytes written, the rest still zeros) is a
    // torn tail; the zeros after it go with it.
    let torn_len = usize::try_from(all - written).unwrap() / 2;
    let mut torn = crashed.clone();
    let full = fs::read(dir.log()).unwrap();
    let at = usize::try_from(written).unwrap();
    torn[at..at + torn_len].copy_from_slice(&full[at..at + torn_len]);
    fs::write(dir.log(), &torn).unwrap();
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.recovery().records, 6);
    assert_eq!(f.recovery().truncated_bytes, to_u64(crashed.len()) - written);
    assert_eq!(file_len(&dir.log()), written);
    drop(f);
    // A complete, checksum-valid frame after zeros is never dropped: damage in the middle.
    let mut gap = crashed.clone();
    let frame = &full[at..usize::try_from(all).unwrap()];
    let later = at + 8192;
    gap[later..later + frame.len()].copy_from_slice(frame);
    fs::write(dir.log(), &gap).unwrap();
    assert!(matches!(open_err(&dir), OpenError::Corrupt { .. }));
    assert_eq!(fs::read(dir.log()).unwrap(), gap, "left as found");
}

#[test]
fn damage_that_cannot_be_pinned_to_one_tree_is_a_typed_error() {
    let dir = TempDir::new();
    let lens = populate(&dir, &script());
    let full = fs::read(dir.log()).unwrap();
    // Record 2 spans lens[0]..lens[1]: magic, length, header check, checksum, payload. Damage to
    // the frame header, or to the metadata that names the tree, names no tree.
    let start = lens[0];
    for at in [start, start + 9, start + 17, start + 60] {
        fs::write(dir.log(), &full).unwrap();
        flip(&dir.log(), at);
        match open_err(&dir) {
            OpenError::Corrupt { offset, reason } => {
                assert_eq!(offset, start, "damage at {at} reported at the record");
                assert!(reason.contains("valid record follows"), "{reason}");
            }
            other => panic!("damage at {at}: {other:?}"),
        }
    }
    // The first record of a tree: no earlier record vouches for the name it carries.
    fs::write(dir.log(), &full).unwrap();
    flip(&dir.log(), lens[0] - 1);
    assert!(matches!(open_err(&dir), OpenError::Corrupt { .. }));
    // The file is left as it was found: nothing was truncated.
    assert_eq!(file_len(&dir.log()), *lens.last().unwrap());
}

#[test]
fn damage_inside_one_record_of_a_known_tree_isolates_that_tree() {
    let dir = TempDir::new();
    let requests = script();
    let lens = populate(&dir, &requests);
    let full = fs::read(dir.log()).unwrap();
    // Record 2 (the root's pending boundary): its checksum, then the last byte of its cut.
    for at in [lens[0] + 30, lens[1] - 1] {
        fs::write(dir.log(), &full).unwrap();
        flip(&dir.log(), at);
        let f = FileCommitter::open(&dir.0).unwrap();
        let damage = f.damaged_trees();
        assert_eq!(damage.len(), 1, "damage at {at}: {damage:?}");
        assert_eq!(damage[0].root, root().as_str());
        assert_eq!(damage[0].location, format!("commit log byte {}", lens[0]));
        let got = block_on(f.load_tree(&root()));
        assert!(matches!(&got, Err(CommitError::Damaged { root: r, .. }) if *r == root()), "{got:?}");
        assert!(matches!(send(&f, &requests[6]), Err(CommitError::Damaged { .. })));
        // The other tree is served: its head loads and it commits.
        let other_head = block_on(f.load_tree(&other_root())).unwrap().unwrap();
        assert_eq!(other_head.cut, *requests[2].cut());
        send(&f, &Request::Checkpoint(progress(2, 50, cut_of(other_root(), 51, 7)))).unwrap();
        // Only the other tree's records were replayed (its start), plus the root's start.
        assert_eq!(f.recovery().records, 2);
        drop(f);
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!(f.head(&other_root()).unwrap().sequence, 2);
        assert_eq!(f.damaged_trees().len(), 1);
    }
}

#[test]
fn a_store_of_several_trees_with_one_corrupted_record_serves_the_rest() {
    let dir = TempDir::new();
    let roots: Vec<ProcessId> =
        ["alpha", "beta", "gamma"].iter().map(|n| ProcessId::parse(&format!("process:{n}")).unwrap()).collect();
    let mut lens = Vec::new();
    {
        let f = FileCommitter::open(&dir.0).unwrap();
        // Interleaved: every tree starts, then each advances three times in turn.
        for (i, r) in roots.iter().enumerate() {
            let n = u8::try_from(i).unwrap() * 10 + 1;
            send(&f, &Request::Checkpoint(start(cut_of(r.clone(), n, 1)))).unwrap();
            lens.push(f.stats().log_bytes);
        }
        for step in 1..=3u8 {
            for (i, r) in roots.iter().enumerate() {
                let n = u8::try_from(i).unwrap() * 10 + 1 + step;
                let next = Request::Checkpoint(progress(u64::from(step) + 1, n - 1, cut_of(r.clone(), n, 1)));
                send(&f, &next).unwrap();
                lens.push(f.stats().log_bytes);
            }
        }
    }
    // The byte before lens[4] ends beta's first progress record: flip it on disk.
    flip(&dir.log(), lens[4] - 1);
    let f = FileCommitter::open(&dir.0).unwrap();
    let damaged: Vec<String> = f.damaged_trees().into_iter().map(|d| d.root).collect();
    assert_eq!(damaged, vec!["process:beta".to_owned()]);
    assert!(matches!(block_on(f.load_tree(&roots[1])), Err(CommitError::Damaged { .. })));
    for (i, r) in [(0u8, &roots[0]), (2, &roots[2])] {
        let head = block_on(f.load_tree(r)).unwrap().unwrap();
        assert_eq!(head.sequence, 4, "{r}");
        let last = i * 10 + 4;
        send(&f, &Request::Checkpoint(progress(5, last, cut_of(r.clone(), last + 1, 1)))).unwrap();
    }
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.head(&roots[0]).unwrap().sequence, 5);
    assert_eq!(f.head(&roots[2]).unwrap().sequence, 5);
    assert_eq!(f.damaged_trees().len(), 1);
}

#[test]
fn damage_inside_the_last_record_is_damage_never_a_torn_write() {
    let dir = TempDir::new();
    let requests = script();
    let lens = populate(&dir, &requests);
    let full = fs::read(dir.log()).unwrap();
    // A flipped bit in the last record's checksum, its metadata's end or its last byte; the
    // record belongs to a tree earlier records name, so that tree is isolated as damaged.
    for at in [lens[5] + 30, lens[6] - 1] {
        fs::write(dir.log(), &full).unwrap();
        flip(&dir.log(), at);
        let damaged = fs::read(dir.log()).unwrap();
        let inspected = FileCommitter::open_read_only(&dir.0, FileOptions::default()).unwrap();
        assert_eq!(inspected.recovery().torn_tail, None, "flip at {at}");
        assert_eq!(inspected.damaged_trees().len(), 1, "flip at {at}");
        drop(inspected);
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!((f.recovery().records, f.recovery().truncated_bytes, f.recovery().torn_tail.as_ref()), (6, 0, None));
        let damage = f.damaged_trees();
        assert_eq!(damage.len(), 1, "flip at {at}: {damage:?}");
        assert_eq!((damage[0].root.as_str(), damage[0].location.as_str()), (root().as_str(), &*format!("commit log byte {}", lens[5])));
        assert!(damage[0].reason.contains("not an interrupted write"), "{}", damage[0].reason);
        assert!(matches!(block_on(f.load_tree(&root())), Err(CommitError::Damaged { .. })));
        assert_eq!(fs::read(dir.log()).unwrap(), damaged, "nothing cut");
        // The other tree commits, after the damaged record, and it all reopens alike.
        send(&f, &Request::Checkpoint(progress(2, 50, cut_of(other_root(), 51, 7)))).unwrap();
        drop(f);
        assert_eq!(fs::read(dir.log()).unwrap()[..damaged.len()], damaged[..], "kept in the middle");
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!(f.head(&other_root()).unwrap().sequence, 2);
        assert_eq!(f.damaged_trees().len(), 1);
    }
    // The last record is the first of its tree: nothing vouches for the tree its metadata
    // names, so the open refuses, naming the byte to cut at and leaving the log as it was.
    let dir = TempDir::new();
    let lens = populate(&dir, &requests[..3]);
    flip(&dir.log(), lens[2] - 1);
    let damaged = fs::read(dir.log()).unwrap();
    for opened in [FileCommitter::open(&dir.0), FileCommitter::open_read_only(&dir.0, FileOptions::default())] {
        match opened {
            Err(OpenError::Corrupt { offset, reason }) => {
                assert_eq!(offset, lens[1]);
                assert!(reason.contains("complete yet fails its checksum"), "{reason}");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened a store whose last record is damaged"),
        }
        assert_eq!(fs::read(dir.log()).unwrap(), damaged);
    }
}

#[test]
fn inspection_reports_a_torn_tail_and_changes_nothing() {
    let dir = TempDir::new();
    let requests = script();
    let lens = populate(&dir, &requests);
    let full = fs::read(dir.log()).unwrap();
    // The last record's metadata written whole, the rest of it missing.
    let cut_at = usize::try_from(lens[6]).unwrap() - 3;
    fs::write(dir.log(), &full[..cut_at]).unwrap();
    let before = fs::read(dir.log()).unwrap();
    for _ in 0..2 {
        let f = FileCommitter::open_read_only(&dir.0, FileOptions::default()).unwrap();
        let expected = TornTail {
            offset: lens[5],
            bytes: to_u64(cut_at) - lens[5],
            root: Some(root().as_str().to_owned()),
            sequence: Some(2),
        };
        assert_eq!(f.recovery(), &Recovery { created: false, records: 6, truncated_bytes: 0, torn_tail: Some(expected) });
        // Reads answer; writes are refused.
        assert_eq!(f.head(&root()).unwrap().sequence, 1);
        assert!(matches!(send(&f, &requests[6]), Err(CommitError::Storage { message }) if message.contains("read-only")));
        assert!(matches!(f.compact_now(), Err(CompactError::Storage { .. })));
        drop(f);
        assert_eq!(fs::read(dir.log()).unwrap(), before, "inspection changes no byte");
    }
    let listing = |d: &Path| {
        let mut names: Vec<String> = fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(listing(&dir.0), vec![LOG_FILE_NAME.to_owned()], "no lock file, no temporary file");
    // Only a writer's open cuts it.
    let f = FileCommitter::open_existing(&dir.0, FileOptions::default()).unwrap();
    assert_eq!(f.recovery().truncated_bytes, to_u64(cut_at) - lens[5]);
    assert_eq!(file_len(&dir.log()), lens[5]);
    // Inspection and an existing-store open never create a store.
    let missing = dir.0.join("nothing-here");
    assert!(matches!(FileCommitter::open_read_only(&missing, FileOptions::default()), Err(OpenError::NoLog { .. })));
    assert!(matches!(FileCommitter::open_existing(&missing, FileOptions::default()), Err(OpenError::NoLog { .. })));
    assert!(!missing.exists());
    let empty = dir.0.join("empty");
    fs::create_dir(&empty).unwrap();
    assert!(matches!(FileCommitter::open_read_only(&empty, FileOptions::default()), Err(OpenError::NoLog { .. })));
    assert!(listing(&empty).is_empty());
    assert!(matches!(FileCommitter::open_read_only(dir.log(), FileOptions::default()), Err(OpenError::NotADirectory { .. })));
}

#[test]
fn a_directory_whose_log_is_not_keels_is_refused_and_nothing_is_created_in_it() {
    let dir = TempDir::new();
    fs::create_dir_all(&dir.0).unwrap();
    let foreign = b"2026-12-07 01:00:00 INFO some other program's commits.log\n".to_vec();
    fs::write(dir.log(), &foreign).unwrap();
    let opens: [fn(&Path) -> Result<FileCommitter, OpenError>; 3] = [
        |d| FileCommitter::open(d),
        |d| FileCommitter::open_existing(d, FileOptions::default()),
        |d| FileCommitter::open_read_only(d, FileOptions::default()),
    ];
    for open in opens {
        let err = open(&dir.0).err().expect("a foreign log is refused");
        assert!(matches!(err, OpenError::NotALog { .. }), "{err:?}");
        assert!(err.to_string().contains("give keel a directory of its own"), "{err}");
        let names: Vec<_> = fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from(LOG_FILE_NAME)], "nothing created beside it");
        assert_eq!(fs::read(dir.log()).unwrap(), foreign);
    }
    // A file where the directory should be.
    let err = FileCommitter::open(dir.log()).err().expect("a file is not a store directory");
    assert!(matches!(err, OpenError::NotADirectory { .. }), "{err:?}");
}

#[test]
fn a_file_without_the_header_is_not_a_log() {
    let dir = TempDir::new();
    fs::create_dir_all(&dir.0).unwrap();
    for content in [&b""[..], b"keel.commits.v3", b"keel.commits.v4\n", b"{\"not\":\"a log\"}"] {
        fs::write(dir.log(), content).unwrap();
        assert!(matches!(open_err(&dir), OpenError::NotALog { .. }), "{content:?}");
    }
}

#[test]
fn logs_of_formats_v1_and_v2_are_refused_with_what_to_do() {
    for version in ["v1", "v2"] {
        let dir = TempDir::new();
        fs::create_dir_all(&dir.0).unwrap();
        let mut old = format!("keel.commits.{version}\n").into_bytes();
        old.extend_from_slice(b"KEELREC\n and whatever followed");
        fs::write(dir.log(), &old).unwrap();
        let err = open_err(&dir);
        assert!(matches!(&err, OpenError::UnsupportedVersion { found, .. } if found == version), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&format!("format {version}")) && text.contains("reads format v3"), "{text}");
        assert!(text.contains("keel-store export"), "{text}");
        assert_eq!(fs::read(dir.log()).unwrap(), old, "the old log is left untouched");
    }
}

#[test]
fn records_above_the_bound_are_refused_on_commit_and_on_replay() {
    let dir = TempDir::new();
    let f = FileCommitter::open_with_limit(&dir.0, 1200).unwrap();
    send(&f, &Request::Checkpoint(start(cut(1, 1)))).unwrap();
    let before = file_len(&dir.log());
    let big_of = |n: u8| {
        let state = format!("{n}{}", "x".repeat(1200));
        crate::kernel::commit::conformance::sample_cut(&root(), &inc(1), &[(root().as_str(), &state)])
    };
    let big = big_of(2);
    let got = send(&f, &Request::Checkpoint(progress(2, 1, big.clone())));
    assert!(matches!(got, Err(CommitError::RecordTooLarge { max: 1200, .. })), "{got:?}");
    assert_eq!(file_len(&dir.log()), before, "nothing written");
    assert_eq!(f.history(&root()).len(), 1, "nothing installed");
    // The store keeps working, and the same identity is still free.
    send(&f, &Request::Checkpoint(progress(2, 1, cut(2, 1)))).unwrap();
    drop(f);
    // A record written under a larger bound is refused (typed) when opened with a smaller one.
    let f = FileCommitter::open(&dir.0).unwrap();
    let mut third = progress(3, 2, big_of(3));
    third.previous_digest = Some(cut(2, 1).digest);
    send(&f, &Request::Checkpoint(third)).unwrap();
    drop(f);
    match FileCommitter::open_with_limit(&dir.0, 1200) {
        Err(OpenError::RecordTooLarge { max: 1200, .. }) => {}
        other => panic!("{:?}", other.map(|f| f.recovery().clone())),
    }
    assert_eq!(FileCommitter::open(&dir.0).unwrap().recovery().records, 3);
}

/// The installation a request would carry at `sequence` (for hand-written records).
fn installation_of(r: &Request, sequence: u64) -> Installation {
    use crate::kernel::commit::CommitRecordKind;
    let (identity, content_digest, kind) = match r {
        Request::Checkpoint(c) => {
            (c.identity(), c.content_digest(), CommitRecordKind::Checkpoint(c.kind))
        }
        Request::Effect(b) => (
            b.identity(),
            b.content_digest(),
            CommitRecordKind::Effect {
                process_id: b.process_id.clone(),
                effect_id: b.effect_id.clone(),
                kind: b.kind,
            },
        ),
        Request::Activation(a) => (
            a.identity(),
            a.content_digest(),
            CommitRecordKind::Activation { previous_incarnation: a.previous_incarnation.clone() },
        ),
    };
    Installation { identity, content_digest, kind, sequence, cut: r.cut().clone(), carried: r.cut().clone() }
}

/// The record metadata as it was encoded before the direct writer: a `Json` tree built
/// member by member, then encoded canonically (what the direct writer must equal, byte for byte).
mod tree_encoding {
    use super::super::record::{Listed, LoggedCut, Request};
    use crate::json::{Digest, Json, ObjectBuilder, ToJson};
    use crate::kernel::commit::{CommitRecord, CommitRecordKind, Head, Installation};

    fn cut_fields(builder: ObjectBuilder, cut: &LoggedCut) -> ObjectBuilder {
        let n = |v: usize| (v as u64).to_json();
        let lens = Json::Array(vec![n(cut.envelope.head().len()), n(cut.envelope.tail().len())]);
        let records = cut
            .listed
            .iter()
            .map(|l| match l {
                Listed::Carried(e) => Json::Array(vec![
                    Json::String(e.key().to_owned()),
                    e.digest().to_json(),
                    n(e.bytes().map_or(0, |b| b.len())),
                ]),
                Listed::Kept { start, count } => Json::Array(vec![n(*start), n(*count)]),
            })
            .collect();
        builder
            .field("root_id", &cut.root_id)
            .field("incarnation_id", &cut.incarnation)
            .field("cut_digest", &cut.digest)
            .value("envelope", lens)
            .value("records", Json::Array(records))
    }

    pub(super) fn record(request: &Request, cut: &LoggedCut, i: &Installation) -> Vec<u8> {
        let common = |commit: &str| {
            ObjectBuilder::new()
                .field("commit", commit)
                .field("identity", &i.identity)
                .field("content_digest", &i.content_digest)
                .field("sequence", &i.sequence)
        };
        let meta = match request {
            Request::Checkpoint(c) => common("checkpoint")
                .field("kind", c.kind.as_str())
                .opt_field("previous_digest", c.previous_digest.as_ref()),
            Request::Effect(b) => common("effect")
                .field("kind", b.kind.as_str())
                .field("process_id", &b.process_id)
                .field("effect_id", &b.effect_id)
                .field("step_sequence", &b.step_sequence)
                .field("batch_index", &b.batch_index)
                .field("effect_digest", &b.effect_digest)
                .opt_field("settlement_digest", b.settlement_digest.as_ref())
                .field("previous_digest", &b.previous_digest),
            Request::Activation(a) => common("activation")
                .field("previous_incarnation", &a.previous_incarnation)
                .field("previous_digest", &a.previous_digest),
        };
        cut_fields(meta, cut).build().to_canonical_bytes()
    }

    pub(super) fn base(head: &Head, commits: &[(CommitRecord, Digest)]) -> Vec<u8> {
        let commits = commits
            .iter()
            .map(|(c, content)| {
                let b = ObjectBuilder::new()
                    .field("identity", &c.identity)
                    .field("content_digest", content)
                    .field("sequence", &c.sequence)
                    .field("incarnation_id", &c.incarnation)
                    .field("cut_digest", &c.cut_digest);
                match &c.kind {
                    CommitRecordKind::Checkpoint(k) => b.field("checkpoint", k.as_str()),
                    CommitRecordKind::Effect { process_id, effect_id, kind } => b
                        .field("effect", kind.as_str())
                        .field("process_id", process_id)
                        .field("effect_id", effect_id),
                    CommitRecordKind::Activation { previous_incarnation } => {
                        b.field("previous_incarnation", previous_incarnation)
                    }
                }
                .build()
            })
            .collect();
        let meta = ObjectBuilder::new()
            .field("commit", "base")
            .field("sequence", &head.sequence)
            .value("commits", Json::Array(commits));
        cut_fields(meta, &LoggedCut::whole(&head.cut)).build().to_canonical_bytes()
    }
}

#[test]
fn record_metadata_written_directly_equals_the_tree_encoding() {
    use crate::kernel::commit::CommitRecordKind;
    let requests = script();
    let mut commits = Vec::new();
    for (at, r) in requests.iter().enumerate() {
        let installation = installation_of(r, at as u64 + 1);
        // Every record carried, and a listing with a run of the head's records.
        let whole = LoggedCut::listing(r.cut(), r.cut(), None);
        let head = cut_of(r.cut().root_id.clone(), 99, writer(r.cut()));
        let kept = LoggedCut::listing(r.cut(), r.cut(), Some(&head));
        assert!(kept.listed.iter().any(|l| matches!(l, Listed::Kept { .. })), "{kept:?}");
        for listing in [&whole, &kept] {
            let written = encode_record(r, listing, &installation);
            assert_eq!(
                String::from_utf8(written.meta).unwrap(),
                String::from_utf8(tree_encoding::record(r, listing, &installation)).unwrap()
            );
        }
        commits.push((
            CommitRecord {
                identity: installation.identity.clone(),
                kind: installation.kind.clone(),
                sequence: installation.sequence,
                incarnation: r.cut().incarnation.clone(),
                cut_digest: r.cut().digest,
            },
            installation.content_digest,
        ));
    }
    assert!(commits.iter().any(|(c, _)| matches!(c.kind, CommitRecordKind::Activation { .. })));
    let head = Head { cut: cut(6, 2), sequence: 7 };
    for n in [0, 1, commits.len()] {
        let written = encode_base(&head, &commits[..n]);
        assert_eq!(
            String::from_utf8(written.meta).unwrap(),
            String::from_utf8(tree_encoding::base(&head, &commits[..n])).unwrap()
        );
    }
}

#[test]
fn a_checksum_valid_record_that_does_not_decode_is_corrupt() {
    let first = Request::Checkpoint(start(cut(1, 1)));
    let (meta, blobs) = record_of(&first, &installation_of(&first, 1));
    let meta = String::from_utf8(meta).unwrap();
    let spaced = meta.replacen(':', ": ", 1);
    let unknown_member = meta.replacen('{', "{\"extra\":1,", 1);
    let unknown_commit = meta.replacen("\"checkpoint\"", "\"snapshot\"", 1);
    let unknown_kind = meta.replacen("\"start\"", "\"begin\"", 1);
    // Metadata that names no tree refuses the open.
    for bad in ["not json", "{}"] {
        let dir = TempDir::new();
        populate(&dir, &[]);
        append_raw(&dir.log(), bad.as_bytes(), &blobs);
        assert!(matches!(open_err(&dir), OpenError::Corrupt { .. }), "{bad}");
    }
    // Metadata that names its tree (intact: the checksum holds) damages only that tree.
    for bad in [&spaced, &unknown_member, &unknown_commit, &unknown_kind] {
        let dir = TempDir::new();
        populate(&dir, &[]);
        append_raw(&dir.log(), bad.as_bytes(), &blobs);
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!(f.damaged_trees().len(), 1, "{bad}");
        assert_eq!(f.damaged_trees()[0].root, root().as_str(), "{bad}");
        assert!(matches!(block_on(f.load_tree(&root())), Err(CommitError::Damaged { .. })));
    }
    // A payload too short for its own metadata length.
    let dir = TempDir::new();
    populate(&dir, &[]);
    let mut f = OpenOptions::new().append(true).open(dir.log()).unwrap();
    let payload = [9u8, 0, 0];
    let mut frame = FRAME_MAGIC.to_vec();
    frame.extend_from_slice(&3u64.to_le_bytes());
    frame.extend_from_slice(&header_check(3));
    frame.extend_from_slice(&Sha256::digest(payload));
    frame.extend_from_slice(&payload);
    f.write_all(&frame).unwrap();
    drop(f);
    assert!(matches!(open_err(&dir), OpenError::Corrupt { .. }));
    // The well-formed version of the same record replays.
    let dir = TempDir::new();
    populate(&dir, &[]);
    append_raw(&dir.log(), meta.as_bytes(), &blobs);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.recovery().records, 1);
    assert_eq!(f.head(&root()).unwrap().cut, *first.cut());
}

#[test]
fn a_record_that_breaks_the_rules_damages_its_tree() {
    let requests = script();
    let cases: [(&[Request], &Request, Installation, &str); 4] = [
        (&requests[..1], &requests[3], installation_of(&requests[3], 3), "gap"),
        (&requests[..1], &requests[0], installation_of(&requests[0], 1), "head written twice"),
        (&requests[..1], &requests[1], installation_of(&requests[1], 5), "wrong stored sequence"),
        (
            &requests[..1],
            &requests[1],
            Installation { identity: "commit:forged".into(), ..installation_of(&requests[1], 2) },
            "wrong stored identity",
        ),
    ];
    for (before, record, installation, what) in cases {
        let dir = TempDir::new();
        populate(&dir, before);
        let (meta, blobs) = record_of(record, &installation);
        append_raw(&dir.log(), &meta, &blobs);
        let f = FileCommitter::open(&dir.0).unwrap();
        let damage = f.damaged_trees();
        assert_eq!(damage.len(), 1, "{what}");
        assert!(damage[0].reason.contains("breaks the commit rules"), "{what}: {damage:?}");
        assert!(matches!(block_on(f.load_tree(&root())), Err(CommitError::Damaged { .. })), "{what}");
        // Everything before the broken record was replayed.
        assert_eq!(f.head(&root()).unwrap().sequence, 1, "{what}");
    }
    // Control: the honest record replays.
    let dir = TempDir::new();
    populate(&dir, &requests[..1]);
    let honest = installation_of(&requests[1], 2);
    let (meta, blobs) = record_of(&requests[1], &honest);
    append_raw(&dir.log(), &meta, &blobs);
    assert_eq!(FileCommitter::open(&dir.0).unwrap().recovery().records, 2);
}

#[test]
fn a_failed_append_stops_the_store_until_reopened() {
    let dir = TempDir::new();
    let requests = script();
    let f = FileCommitter::open(&dir.0).unwrap();
    send(&f, &requests[0]).unwrap();
    // A read-only handle makes the next write fail like a full or broken disk would.
    f.lock().log = File::open(dir.log()).unwrap();
    assert!(matches!(send(&f, &requests[1]), Err(CommitError::Storage { .. })));
    assert!(matches!(send(&f, &requests[0]), Err(CommitError::Storage { .. })), "even retries");
    assert!(matches!(block_on(f.load_tree(&root())), Err(CommitError::Storage { .. })));
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.recovery().records, 1);
    send(&f, &requests[1]).unwrap();
}

#[test]
fn open_creates_missing_directories_and_ignores_a_stale_new_log() {
    let dir = TempDir::new();
    let nested = dir.0.join("a").join("b");
    fs::create_dir_all(&nested).unwrap();
    // A crash while creating the log leaves only the temporary file behind.
    fs::write(nested.join(NEW_LOG_FILE_NAME), b"keel.com").unwrap();
    let f = FileCommitter::open(&nested).unwrap();
    assert!(f.recovery().created);
    assert!(!nested.join(NEW_LOG_FILE_NAME).exists());
    send(&f, &script()[0]).unwrap();
    drop(f);
    let deeper = dir.0.join("x").join("y");
    assert!(FileCommitter::open(&deeper).unwrap().recovery().created);
    let f = FileCommitter::open(&nested).unwrap();
    assert_eq!(f.recovery(), &Recovery { created: false, records: 1, truncated_bytes: 0, torn_tail: None });
    assert_eq!(f.roots(), vec![root()]);
}

#[test]
fn an_empty_log_reopens_empty() {
    let dir = TempDir::new();
    drop(FileCommitter::open(&dir.0).unwrap());
    assert_eq!(file_len(&dir.log()), to_u64(FILE_HEADER.len()));
    let f = FileCommitter::open(&dir.0).unwrap();
    assert!(f.roots().is_empty());
    assert_eq!(block_on(f.load_tree(&root())).unwrap(), None);
}

#[test]
fn a_second_opener_is_refused_with_the_holders_pid_until_the_first_is_dropped() {
    let dir = TempDir::new();
    let first = FileCommitter::open(&dir.0).unwrap();
    send(&first, &script()[0]).unwrap();
    let before = fs::read(dir.log()).unwrap();
    match FileCommitter::open(&dir.0) {
        Err(OpenError::Locked { dir: locked, pid }) => {
            assert_eq!(locked, dir.0);
            assert_eq!(pid, Some(std::process::id()));
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second committer opened a held directory"),
    }
    // The refused opener touched nothing, and the holder goes on committing.
    assert_eq!(fs::read(dir.log()).unwrap(), before);
    send(&first, &script()[1]).unwrap();
    drop(first);
    let reopened = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(reopened.recovery().records, 2);
}

#[test]
fn deleting_renaming_or_recreating_store_lock_admits_no_second_writer() {
    let dir = TempDir::new();
    let first = FileCommitter::open(&dir.0).unwrap();
    send(&first, &script()[0]).unwrap();
    let lock_file = dir.0.join(lock::LEGACY_LOCK_FILE_NAME);
    let aside = dir.0.join("store.lock.aside");
    let tamper: [(&str, Box<dyn Fn()>); 3] = [
        ("deleted", Box::new(|| {
            let _ = fs::remove_file(&lock_file);
        })),
        ("renamed", Box::new(|| {
            fs::write(&lock_file, b"").unwrap();
            fs::rename(&lock_file, &aside).unwrap();
        })),
        ("recreated", Box::new(|| {
            let _ = fs::remove_file(&lock_file);
            fs::write(&lock_file, b"12345\n").unwrap();
        })),
    ];
    for (what, tamper) in tamper {
        tamper();
        for (mode, opened) in [
            ("writer", FileCommitter::open(&dir.0)),
            ("inspection", FileCommitter::open_read_only(&dir.0, FileOptions::default())),
        ] {
            match opened {
                Err(OpenError::Locked { .. }) => {}
                Err(e) => panic!("store.lock {what}, {mode}: {e}"),
                Ok(_) => panic!("store.lock {what}: a second {mode} opened a store with a running writer"),
            }
        }
    }
    // The writer never noticed.
    send(&first, &script()[1]).unwrap();
    drop(first);
    assert_eq!(FileCommitter::open(&dir.0).unwrap().recovery().records, 2);
}

#[test]
fn exclusion_holds_across_compaction() {
    let dir = TempDir::new();
    let requests = script();
    let first = FileCommitter::open(&dir.0).unwrap();
    for r in &requests[..6] {
        send(&first, r).unwrap();
    }
    // An opener that opened the log just before the compaction renamed a new one over it.
    let stale = File::open(dir.log()).unwrap();
    first.compact_now().unwrap();
    // The new log was locked before it was renamed into place: held at every instant.
    let fresh = File::open(dir.log()).unwrap();
    assert!(matches!(fresh.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)));
    assert!(matches!(open_err(&dir), OpenError::Locked { .. }));
    // The old file's lock went with the writer's old handle, so the stale opener gets it; it
    // must see that the path names another file now (and start over, finding that one held).
    stale.try_lock().unwrap();
    assert!(!lock::is_at_path(&stale, &dir.log()).unwrap());
    assert!(lock::is_at_path(&fresh, &dir.log()).unwrap());
    drop(stale);
    assert!(!dir.0.join(NEW_LOG_FILE_NAME).exists());
    // The writer goes on, and still excludes after commits on the new log.
    send(&first, &requests[6]).unwrap();
    assert!(matches!(open_err(&dir), OpenError::Locked { .. }));
    drop(first);
    let reopened = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(reopened.head(&root()).unwrap().sequence, 2);
}

#[test]
fn inspections_share_the_store_and_exclude_a_writer() {
    let dir = TempDir::new();
    populate(&dir, &script()[..2]);
    let a = FileCommitter::open_read_only(&dir.0, FileOptions::default()).unwrap();
    let b = FileCommitter::open_read_only(&dir.0, FileOptions::default()).unwrap();
    assert_eq!(a.roots(), b.roots());
    assert!(matches!(open_err(&dir), OpenError::Locked { .. }));
    drop((a, b));
    let writer = FileCommitter::open(&dir.0).unwrap();
    assert!(matches!(FileCommitter::open_read_only(&dir.0, FileOptions::default()), Err(OpenError::Locked { .. })));
    drop(writer);
}

#[test]
fn a_writer_of_an_earlier_release_holding_store_lock_is_respected() {
    let dir = TempDir::new();
    populate(&dir, &script()[..1]);
    // Earlier releases locked store.lock (and wrote their pid into it), not the log.
    let lock_file = dir.0.join(lock::LEGACY_LOCK_FILE_NAME);
    fs::write(&lock_file, b"4242\n").unwrap();
    let old_writer = File::open(&lock_file).unwrap();
    old_writer.try_lock().unwrap();
    assert!(matches!(open_err(&dir), OpenError::Locked { pid: Some(4242), .. }));
    assert!(matches!(FileCommitter::open_read_only(&dir.0, FileOptions::default()), Err(OpenError::Locked { .. })));
    drop(old_writer);
    drop(FileCommitter::open(&dir.0).unwrap());
    assert_eq!(fs::read(&lock_file).unwrap(), b"4242\n", "never written by this release");
}

#[test]
fn the_locked_error_says_who_holds_the_store_and_what_to_do() {
    let e = OpenError::Locked { dir: PathBuf::from("/data/agents"), pid: Some(4242) };
    assert_eq!(
        e.to_string(),
        "store /data/agents is in use by process 4242; stop that writer or open another directory"
    );
    let e = OpenError::Locked { dir: PathBuf::from("/data/agents"), pid: None };
    assert!(e.to_string().contains("in use by another process"), "{e}");
    // Unknown holder, or this very process: the transient holder a process spawning children
    // meets (a child being spawned shares the lock until its exec) is named, with the remedy.
    assert!(e.to_string().contains("a child process being spawned holds a copy of the lock"), "{e}");
    assert!(e.to_string().contains("retry the open"), "{e}");
    let e = OpenError::Locked { dir: PathBuf::from("/data/agents"), pid: Some(std::process::id()) };
    let own = format!("is in use by process {}; that is this process", std::process::id());
    assert!(e.to_string().contains(&own), "{e}");
    assert!(e.to_string().contains("a child process being spawned holds a copy of the lock"), "{e}");
}

/// A chain of progress checkpoints of the root where only the root's record changes, sent as
/// deltas the way the kernel sends them (the `process:kept` record travels as key and digest).
fn delta_chain(n: u8) -> Vec<Request> {
    let mut out = vec![Request::Checkpoint(start(cut(1, 1)))];
    for i in 2..=n {
        let whole = cut(i, 1);
        out.push(Request::Checkpoint(progress(u64::from(i), i - 1, whole.delta_from(&cut(i - 1, 1)))));
    }
    out
}

#[test]
fn deltas_log_only_changed_records_and_replay_to_whole_heads() {
    let dir = TempDir::new();
    let requests = delta_chain(6);
    assert!(!requests[1].cut().is_whole(), "the chain sends deltas");
    let lens = populate(&dir, &requests);
    let memory = MemoryCommitter::new();
    for r in &requests {
        send(&memory, r).unwrap();
    }
    // A progress record holds the root's record but not the kept one: each is smaller than
    // the start (which carries both) by about the kept record.
    let kept = cut(1, 1).entries()[1].bytes().unwrap().len() as u64;
    let start_len = lens[0] - to_u64(FILE_HEADER.len());
    for pair in lens.windows(2) {
        assert!(pair[1] - pair[0] + kept <= start_len + 16, "{lens:?} kept {kept}");
    }
    // The same chain sent whole logs the same bytes: an unchanged record sent whole is kept
    // like one sent as key and digest.
    let whole_dir = TempDir::new();
    let whole: Vec<Request> = (1..=6u8)
        .map(|i| if i == 1 { Request::Checkpoint(start(cut(1, 1))) } else { Request::Checkpoint(progress(u64::from(i), i - 1, cut(i, 1))) })
        .collect();
    assert_eq!(populate(&whole_dir, &whole), lens);
    assert_eq!(fs::read(whole_dir.log()).unwrap(), fs::read(dir.log()).unwrap());
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.head(&root()), memory.head(&root()));
    let head = f.head(&root()).unwrap();
    assert!(head.cut.is_whole());
    assert_eq!(head.cut.bytes().unwrap(), cut(6, 1).bytes().unwrap());
    assert_eq!(f.history(&root()), memory.history(&root()));
}

#[test]
fn a_logged_run_the_head_lacks_damages_its_tree() {
    // Written by hand past the rules: cut 2's root record, then a run of the head's records
    // 1..3 (the head, cut 1, holds two), and a start that keeps records of a head it lacks.
    let whole = cut(2, 1);
    let forged = Request::Checkpoint(progress(2, 1, whole.clone()));
    let listing = LoggedCut {
        listed: vec![Listed::Carried(whole.entries()[0].clone()), Listed::Kept { start: 1, count: 2 }],
        ..LoggedCut::whole(&whole)
    };
    let (meta, blobs) = listed_record(&forged, &installation_of(&forged, 2), &listing);
    let dir = TempDir::new();
    populate(&dir, &[Request::Checkpoint(start(cut(1, 1)))]);
    append_raw(&dir.log(), &meta, &blobs);
    let f = FileCommitter::open(&dir.0).unwrap();
    let damage = f.damaged_trees();
    assert_eq!(damage.len(), 1);
    assert!(damage[0].reason.contains("lacks them (it holds 2)"), "{damage:?}");
    assert!(matches!(block_on(f.load_tree(&root())), Err(CommitError::Damaged { .. })));
    drop(f);
    // Control: the run the head does hold replays to the same head as the whole cut.
    let honest = LoggedCut { listed: vec![Listed::Carried(whole.entries()[0].clone()), Listed::Kept { start: 1, count: 1 }], ..listing };
    let (meta, blobs) = listed_record(&forged, &installation_of(&forged, 2), &honest);
    let dir = TempDir::new();
    populate(&dir, &[Request::Checkpoint(start(cut(1, 1)))]);
    append_raw(&dir.log(), &meta, &blobs);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert!(f.damaged_trees().is_empty());
    assert_eq!(f.head(&root()).unwrap().cut, whole);
    drop(f);
    // A start keeps nothing: its tree has no head.
    let first = Request::Checkpoint(start(cut(1, 1)));
    let one = cut(1, 1);
    let kept = LoggedCut { listed: vec![Listed::Kept { start: 0, count: 2 }], ..LoggedCut::whole(&one) };
    let (meta, blobs) = listed_record(&first, &installation_of(&first, 1), &kept);
    let dir = TempDir::new();
    populate(&dir, &[]);
    append_raw(&dir.log(), &meta, &blobs);
    let damage = FileCommitter::open(&dir.0).unwrap().damaged_trees();
    assert!(damage.len() == 1 && damage[0].reason.contains("has none"), "{damage:?}");
}

/// A tree of `n` segment-like records plus the root's, as the kernel keeps it.
fn many(root_state: &str, keys: &[String]) -> TreeCut {
    let root = root();
    let mut records: Vec<(&str, &str)> = vec![(root.as_str(), root_state)];
    records.extend(keys.iter().map(|k| (k.as_str(), k.as_str())));
    crate::kernel::commit::conformance::sample_cut(&root, &inc(1), &records)
}

#[test]
fn a_record_lists_kept_records_as_runs_of_the_head_and_grows_with_changes_only() {
    let keys = |n: usize| (0..n).map(|i| format!("segment:{i:04}")).collect::<Vec<String>>();
    // The log growth of one commit that changes the root's record and appends one record.
    let growth = |n: usize| {
        let dir = TempDir::new();
        let f = FileCommitter::open(&dir.0).unwrap();
        let (before, after) = (many("a", &keys(n)), many("b", &keys(n + 1)));
        send(&f, &Request::Checkpoint(start(before.clone()))).unwrap();
        let at = f.stats().log_bytes;
        let next = Checkpoint { sequence: 2, kind: CheckpointKind::Progress, previous_digest: Some(before.digest), cut: after.delta_from(&before) };
        send(&f, &Request::Checkpoint(next)).unwrap();
        drop(f);
        let f = FileCommitter::open(&dir.0).unwrap();
        assert_eq!(f.head(&root()).unwrap().cut, after, "replays to the whole cut");
        f.stats().log_bytes - at
    };
    let (small, large) = (growth(10), growth(1000));
    // Runs are numbers whatever the count they cover (a few digits more at most).
    assert!(large <= small + 16, "growth with 10 kept records {small}, with 1000 {large}");
    // The listing itself: carried root record, one run, the appended record.
    let (before, after) = (many("a", &keys(5)), many("b", &keys(6)));
    let sent = after.delta_from(&before);
    let listing = LoggedCut::listing(&sent, &after, Some(&before));
    assert_eq!(
        listing.listed,
        vec![
            Listed::Carried(after.entries()[0].clone()),
            Listed::Kept { start: 1, count: 5 },
            Listed::Carried(after.entries()[6].clone()),
        ]
    );
    // The same cut sent whole lists the same way: a carried record that is the next head
    // entry unchanged is kept.
    assert_eq!(LoggedCut::listing(&after, &after, Some(&before)), listing);
}

#[test]
fn insertions_removals_and_reorderings_replay_to_the_same_heads() {
    let key = |i: usize| format!("segment:{i:04}");
    let keys = |ids: &[usize]| ids.iter().map(|&i| key(i)).collect::<Vec<String>>();
    // Each cut against the one before: an insertion in the middle, a removal, a swap, a
    // change in the middle, a reversal (every record found by key), everything dropped, and
    // records back.
    let shapes: Vec<(String, Vec<usize>)> = vec![
        ("a".into(), (0..40).collect()),
        ("b".into(), (0..20).chain([100]).chain(20..40).collect()),
        ("c".into(), (0..20).chain([100]).chain(21..40).collect()),
        ("d".into(), (0..20).chain([21, 100]).chain(22..40).collect()),
        ("e".into(), (0..20).chain([21, 100]).chain(22..40).collect()),
        ("f".into(), (0..40).rev().collect()),
        ("g".into(), vec![]),
        ("h".into(), (5..9).collect()),
    ];
    let cuts: Vec<TreeCut> = shapes.iter().map(|(state, ids)| many(state, &keys(ids))).collect();
    // "e" changes record 21 in place: a different record under the same key.
    let cuts: Vec<TreeCut> = cuts
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            if i != 4 {
                return c;
            }
            let mut entries = c.entries().to_vec();
            entries[21] = CutEntry::new(key(21), b"changed".to_vec());
            TreeCut::new(c.root_id.clone(), c.incarnation.clone(), c.envelope().clone(), entries).unwrap()
        })
        .collect();
    let dir = TempDir::new();
    let memory = MemoryCommitter::new();
    let f = FileCommitter::open(&dir.0).unwrap();
    let mut requests = vec![Request::Checkpoint(start(cuts[0].clone()))];
    for (i, pair) in cuts.windows(2).enumerate() {
        let sequence = u64::try_from(i).unwrap() + 2;
        let c = Checkpoint { sequence, kind: CheckpointKind::Progress, previous_digest: Some(pair[0].digest), cut: pair[1].delta_from(&pair[0]) };
        requests.push(Request::Checkpoint(c));
    }
    for r in &requests {
        send(&f, r).unwrap();
        send(&memory, r).unwrap();
        assert_eq!(f.head(&root()), memory.head(&root()));
    }
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.recovery().records, to_u64(cuts.len()));
    assert_eq!(f.head(&root()), memory.head(&root()));
    assert_eq!(f.head(&root()).unwrap().cut.bytes().unwrap(), cuts.last().unwrap().bytes().unwrap());
    assert_eq!(f.history(&root()), memory.history(&root()));
}

#[test]
fn the_decoder_accepts_one_spelling_of_a_listing() {
    let whole = many("a", &["segment:1".into(), "segment:2".into(), "segment:3".into()]);
    let r = Request::Checkpoint(progress(2, 1, whole.clone()));
    let i = installation_of(&r, 2);
    let payload = |listed: Vec<Listed>| {
        let (meta, blobs) = listed_record(&r, &i, &LoggedCut { listed, ..LoggedCut::whole(&whole) });
        let mut out = u32::try_from(meta.len()).unwrap().to_le_bytes().to_vec();
        out.extend_from_slice(&meta);
        out.extend_from_slice(&blobs);
        out
    };
    let root_record = Listed::Carried(whole.entries()[0].clone());
    let good = payload(vec![root_record.clone(), Listed::Kept { start: 1, count: 3 }]);
    assert_eq!(reencode_payload(&good).unwrap(), good);
    let disjoint = payload(vec![Listed::Kept { start: 2, count: 1 }, root_record.clone(), Listed::Kept { start: 0, count: 1 }]);
    assert_eq!(reencode_payload(&disjoint).unwrap(), disjoint);
    for (bad, what) in [
        (payload(vec![root_record.clone(), Listed::Kept { start: 1, count: 1 }, Listed::Kept { start: 2, count: 2 }]), "continue one another"),
        (payload(vec![root_record.clone(), Listed::Kept { start: 1, count: 0 }]), "empty"),
        (payload(vec![root_record.clone(), root_record.clone()]), "twice"),
        (payload(vec![root_record]), "tree digest"),
    ] {
        let err = reencode_payload(&bad).unwrap_err();
        assert!(err.contains(what), "{what}: {err}");
    }
}

#[test]
fn compaction_keeps_heads_facts_and_history() {
    let dir = TempDir::new();
    let memory = MemoryCommitter::new();
    let mut requests = script();
    requests.extend(delta_chain(4).into_iter().map(|r| match r {
        // The same chain under the other root, after its start in `script`.
        Request::Checkpoint(mut c) if c.kind != CheckpointKind::Start => {
            let n = u8::try_from(c.sequence).unwrap();
            let whole = cut_of(other_root(), 49 + n, 7);
            let before = cut_of(other_root(), 48 + n, 7);
            c.previous_digest = Some(before.digest);
            c.cut = whole.delta_from(&before);
            Request::Checkpoint(c)
        }
        other => other,
    }).filter(|r| !matches!(r, Request::Checkpoint(c) if c.kind == CheckpointKind::Start)));
    let f = FileCommitter::open(&dir.0).unwrap();
    for r in &requests {
        send(&f, r).unwrap();
        send(&memory, r).unwrap();
    }
    let before = f.stats();
    let after = f.compact_now().unwrap();
    assert_eq!(after.compactions, 1);
    assert_eq!(after.log_bytes, file_len(&dir.log()));
    assert!(before.log_bytes > 0 && after.live_bytes >= after.log_bytes / 2, "{before:?} {after:?}");
    // Commits continue on the compacted log, and a reopen sees everything.
    let next = Request::Checkpoint(progress(3, 6, cut(7, 2)));
    send(&f, &next).unwrap();
    send(&memory, &next).unwrap();
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    for r in [root(), other_root()] {
        assert_eq!(f.head(&r), memory.head(&r), "head of {r}");
        assert_eq!(f.history(&r), memory.history(&r), "history of {r}");
    }
    // The facts survived: the head's retry is acknowledged, a historical one conflicts.
    send(&f, &next).unwrap();
    let historical = send(&f, &requests[1]);
    assert!(matches!(historical, Err(CommitError::CommitConflict { .. } | CommitError::TreeIncarnationConflict { .. })), "{historical:?}");
    // Compacting twice in a row is harmless.
    f.compact_now().unwrap();
    f.compact_now().unwrap();
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.head(&root()), memory.head(&root()));
    assert!(!dir.0.join(NEW_LOG_FILE_NAME).exists(), "no temporary log is left behind");
}

#[test]
fn the_log_compacts_itself_once_it_outgrows_the_live_state() {
    let dir = TempDir::new();
    let options = FileOptions { compact_ratio: 4, compact_min_bytes: 0, ..FileOptions::default() };
    let f = FileCommitter::open_with_options(&dir.0, options).unwrap();
    let memory = MemoryCommitter::new();
    // Large records, so the heads (not the per-commit facts) dominate the live state.
    let big = |i: u64| {
        let state = format!("{i}{}", "x".repeat(4000));
        crate::kernel::commit::conformance::sample_cut(&root(), &inc(1), &[(root().as_str(), &state), ("process:kept", &"k".repeat(4000))])
    };
    let mut chain = vec![Request::Checkpoint(start(big(1)))];
    for i in 2..=60u64 {
        let (before, whole) = (big(i - 1), big(i));
        chain.push(Request::Checkpoint(Checkpoint {
            sequence: i,
            kind: CheckpointKind::Progress,
            previous_digest: Some(before.digest),
            cut: whole.delta_from(&before),
        }));
    }
    for r in chain {
        send(&f, &r).unwrap();
        send(&memory, &r).unwrap();
        let stats = f.stats();
        assert!(stats.log_bytes <= stats.live_bytes * 4 + 4096, "{stats:?}");
    }
    assert!(f.stats().compactions > 0, "{:?}", f.stats());
    drop(f);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.head(&root()), memory.head(&root()));
    assert_eq!(f.history(&root()), memory.history(&root()));
}

#[test]
fn compaction_is_refused_while_a_tree_is_damaged() {
    let dir = TempDir::new();
    let lens = populate(&dir, &script());
    // Damage the payload of the last record of the first root only (its next record starts
    // right after it): that tree is isolated, the other served.
    flip(&dir.log(), lens[1] - 1);
    let f = FileCommitter::open(&dir.0).unwrap();
    assert_eq!(f.damaged_trees().len(), 1);
    let before = fs::read(dir.log()).unwrap();
    assert!(matches!(f.compact_now(), Err(CompactError::Damaged { .. })));
    assert_eq!(fs::read(dir.log()).unwrap(), before, "the log is untouched");
}

mod group_space;
mod store_faults;

#[test]
fn the_listing_walked_by_reference_equals_the_listing_over_flat_entry_lists() {
    use super::record::listing_of_entries;
    let key = |i: usize| format!("segment:{i:04}");
    let keys = |ids: &[usize]| ids.iter().map(|&i| key(i)).collect::<Vec<String>>();
    // Appends, an insertion, a removal, a swap, a reversal, everything dropped, records back,
    // and one record changed in place under its key.
    let shapes: Vec<Vec<usize>> = vec![
        (0..40).collect(),
        (0..41).collect(),
        (0..20).chain([100]).chain(20..41).collect(),
        (0..20).chain([100]).chain(21..41).collect(),
        (0..20).chain([21, 100]).chain(22..41).collect(),
        (0..41).rev().collect(),
        vec![],
        (5..9).collect(),
        (0..200).collect(),
        (0..100).chain(150..250).collect(),
    ];
    let mut cuts: Vec<TreeCut> =
        shapes.iter().enumerate().map(|(i, ids)| many(&format!("s{i}"), &keys(ids))).collect();
    let changed = {
        let c = &cuts[1];
        let mut entries = c.entries().to_vec();
        entries[21] = CutEntry::new(entries[21].key().to_owned(), b"changed".to_vec());
        TreeCut::new(c.root_id.clone(), c.incarnation.clone(), c.envelope().clone(), entries).unwrap()
    };
    cuts.insert(2, changed);
    let mut compared = 0;
    for before in &cuts {
        for after in &cuts {
            // Fresh copies: neither cut has built its flat entry list yet when the listing runs.
            let fresh = |c: &TreeCut| TreeCut::new(c.root_id.clone(), c.incarnation.clone(), c.envelope().clone(), c.entries().to_vec()).unwrap();
            let delta = fresh(after).delta_from(&fresh(before));
            let whole = delta.resolve(Some(before)).unwrap();
            for (sent, head) in [(&delta, Some(before)), (after, Some(before)), (after, None)] {
                let (b, w, s) = (head.map(fresh), fresh(&whole), fresh(sent));
                let s = if std::ptr::eq(sent, &delta) { fresh(after).delta_from(b.as_ref().unwrap()) } else { s };
                let listing = LoggedCut::listing(&s, &w, b.as_ref());
                assert_eq!(listing, listing_of_entries(sent, &whole, head), "{} -> {}", before.len(), after.len());
                // And the listing is faithful: it rebuilds the whole cut from the head.
                let rebuilt = super::record::materialize(&listing, head).unwrap();
                assert_eq!(rebuilt, whole);
                compared += 1;
            }
        }
    }
    assert_eq!(compared, cuts.len() * cuts.len() * 3);
    // A delta that is not resolved entry for entry is listed whole, as before.
    let delta = cuts[1].delta_from(&cuts[0]);
    assert_eq!(LoggedCut::listing(&delta, &cuts[0], Some(&cuts[0])), listing_of_entries(&delta, &cuts[0], Some(&cuts[0])));
}
