use std::collections::HashSet;

use super::*;
use crate::kernels::loss::IGNORE_INDEX;

fn task(name: &str, options: &[(&str, u32)]) -> Task {
    Task::parse(&TaskSpec {
        name: name.into(),
        options: options.iter().map(|&(k, v)| (k.into(), v)).collect(),
    })
    .unwrap()
}

/// An example of `t` as the text a person reads.
fn shown(t: &Task, e: &Example) -> (String, String) {
    (t.text(&e.prompt), t.text(&e.answer))
}

fn number(t: &Task, ids: &[u32]) -> u64 {
    t.text(ids).parse().unwrap()
}

#[test]
fn every_generator_gives_right_answers() {
    let mut rng = SplitMix64(5);
    for _ in 0..500 {
        let t = task("copy", &[("len", 7)]);
        let (p, a) = shown(&t, &t.example(&mut rng));
        assert_eq!((p.len(), &p[..7], &p[7..]), (8, a.as_str(), ">"));
        let t = task("reverse", &[]);
        let (p, a) = shown(&t, &t.example(&mut rng));
        assert_eq!(p[..5].chars().rev().collect::<String>(), a);
        let t = task("sort", &[("len", 9)]);
        let (p, a) = shown(&t, &t.example(&mut rng));
        let mut digits: Vec<char> = p[..9].chars().collect();
        digits.sort();
        assert_eq!(digits.into_iter().collect::<String>(), a);
        // add: n-digit operands, an n+1-digit sum, all zero-padded
        let t = task("add", &[("digits", 4)]);
        let e = t.example(&mut rng);
        let (p, a) = shown(&t, &e);
        assert_eq!((p.len(), &p[4..5], &p[9..], a.len()), (10, "+", "=", 5));
        assert_eq!(
            number(&t, &e.prompt[..4]) + number(&t, &e.prompt[5..9]),
            number(&t, &e.answer)
        );
        // modadd: a, +, b, =, then the sum, each residue one token
        let t = task("modadd", &[("p", 113)]);
        let e = t.example(&mut rng);
        assert_eq!((e.prompt.len(), e.answer.len()), (4, 1));
        let (a, b, c) = (
            number(&t, &e.prompt[..1]),
            number(&t, &e.prompt[2..3]),
            number(&t, &e.answer),
        );
        assert!(a < 113 && b < 113);
        assert_eq!((a + b) % 113, c);
        assert_eq!(shown(&t, &e).1.len(), 3, "padded to p − 1's digits");
    }
    // the largest sum carries into the extra digit
    let add = task("add", &[("digits", 2)]);
    assert_eq!(
        shown(&add, &add.of_pair(99, 99)),
        ("99+99=".into(), "198".into())
    );
    assert_eq!(
        shown(&add, &add.of_pair(3, 4)),
        ("03+04=".into(), "007".into())
    );
    let modadd = task("modadd", &[("p", 23)]);
    assert_eq!(
        shown(&modadd, &modadd.of_pair(5, 20)),
        ("05+20=".into(), "02".into())
    );
    assert_eq!(modadd.of_pair(5, 20).answer, [ALPHABET.len() as u32 + 2]);
}

#[test]
fn options_are_checked_and_written_out() {
    let spec = task("modadd", &[("p", 31)]).spec();
    assert_eq!(
        spec.options["train_percent"], 50,
        "defaults are written out"
    );
    assert_eq!(Task::parse(&spec).unwrap(), task("modadd", &[("p", 31)]));
    let err = |name: &str, options: &[(&str, u32)]| {
        Task::parse(&TaskSpec {
            name: name.into(),
            options: options.iter().map(|&(k, v)| (k.into(), v)).collect(),
        })
        .unwrap_err()
        .to_string()
    };
    assert!(err("mul", &[]).contains("use one of copy, reverse, sort, add, modadd"));
    assert!(err("sort", &[("digits", 3)]).contains("its options are len"));
    assert!(err("sort", &[("len", 0)]).contains("outside 1..=32"));
    assert!(err("modadd", &[("p", 1000)]).contains("outside 2..=997"));
    let json: TaskSpec = serde_json::from_str(r#"{"name":"add"}"#).unwrap();
    assert_eq!(Task::parse(&json).unwrap(), Task::Add { digits: 3 });
}

#[test]
fn held_out_examples_are_fixed_by_the_seed_and_never_trained_on() {
    for t in [
        task("sort", &[("len", 3)]),
        task("reverse", &[("len", 4)]),
        task("add", &[("digits", 2)]),
    ] {
        let a = TaskSet::new(t, 7, 64).unwrap();
        assert_eq!(a.held_out(), TaskSet::new(t, 7, 64).unwrap().held_out());
        assert_ne!(a.held_out(), TaskSet::new(t, 8, 64).unwrap().held_out());
        let held: HashSet<String> = a.held_out().iter().map(|e| t.text(&e.prompt)).collect();
        assert_eq!(held.len(), a.held_out().len(), "distinct");
        assert!(held.len() as u64 <= t.space() / 5);
        let mut rng = SplitMix64(1);
        let sample = a.training_sample(4, 3);
        assert_eq!(
            sample,
            a.training_sample(4, 3),
            "the same sample every time"
        );
        let drawn = (0..200).map(|_| a.train_batch(&mut rng, 4));
        for b in drawn.chain(sample) {
            for row in b.inputs.chunks(64) {
                // every example starts after an END: the row's first, and each after a `\n`
                let s = t.text(row);
                for prompt in s.split('\n').filter(|p| p.contains(['>', '='])) {
                    let prompt = &prompt[..=prompt.find(['>', '=']).unwrap()];
                    assert!(!held.contains(prompt), "{prompt} is held out");
                }
            }
        }
    }
}

#[test]
fn modadd_splits_all_pairs_in_two() {
    let t = task("modadd", &[("p", 23), ("train_percent", 30)]);
    let set = TaskSet::new(t, 3, 32).unwrap();
    let train: HashSet<u32> = set.train_pairs.iter().copied().collect();
    assert_eq!(train.len(), 23 * 23 * 30 / 100);
    assert_eq!(set.held_out().len(), 23 * 23 - train.len());
    let held: HashSet<Example> = set.held_out().iter().cloned().collect();
    for &i in &train {
        assert!(!held.contains(&t.pair(i as u64)), "pair {i} on both sides");
    }
    assert_eq!(
        set.held_out(),
        TaskSet::new(t, 3, 32).unwrap().held_out(),
        "fixed by the seed"
    );
    let mut rng = SplitMix64(9);
    let b = set.train_batch(&mut rng, 8);
    for row in b.inputs.chunks(32) {
        for ex in t.text(row).split('\n').filter(|s| s.len() == 8) {
            let (a, rest) = ex.split_once('+').unwrap();
            let (b, _) = rest.split_once('=').unwrap();
            let i = a.parse::<u32>().unwrap() * 23 + b.parse::<u32>().unwrap();
            assert!(train.contains(&i), "{ex} is not a training pair");
        }
    }
}

#[test]
fn rows_hold_whole_examples_and_count_only_answers() {
    let t = task("sort", &[("len", 4)]); // "3142>1234\n": 10 tokens
    let set = TaskSet::new(t, 1, 24).unwrap(); // 25 tokens a row: 2 examples and 5 of padding
    let b = &set.validation_batches(3)[0];
    assert_eq!((b.inputs.len(), b.targets.len()), (72, 72));
    let row = &b.targets[..24];
    let counted: Vec<usize> = (0..24).filter(|&i| row[i] != IGNORE_INDEX).collect();
    // position 4 ('>') predicts the first answer digit … position 7 the last
    assert_eq!(counted, [4, 5, 6, 7, 14, 15, 16, 17]);
    let [first, second] = [&set.held_out()[0], &set.held_out()[1]];
    assert_eq!(row[4..8], first.answer[..]);
    assert_eq!(row[14..18], second.answer[..]);
    assert_eq!(
        b.inputs[..10],
        [&first.prompt[..], &first.answer, &[END]].concat()[..]
    );
    assert_eq!(answers(&b.targets, 24).len(), 6);
    // 2000 held out (a fifth of 10⁴ prompts): the last batch is filled out
    let last = set.validation_batches(3).pop().unwrap();
    assert_eq!(set.held_out().len(), 2000);
    assert_eq!(
        (last.inputs.len(), answers(&last.targets, 24).len()),
        (72, 2000 % 6)
    );
    assert!(
        TaskSet::new(t, 1, 8)
            .unwrap_err()
            .to_string()
            .contains("at least 9")
    );
}

#[test]
fn accuracy_counts_whole_answers_and_characters() {
    let ig = IGNORE_INDEX;
    // two rows of 6; answers [1, 2], [4], [0, 1, 2]
    let targets = [ig, 5, 6, ig, 7, ig, 1, 2, 3, ig, ig, ig];
    assert_eq!(answers(&targets, 6), [1..3, 4..5, 6..9]);
    let mut predicted = targets.map(|t| if t == ig { 0 } else { t });
    let all = Accuracy::of(&targets, &predicted, 6);
    assert_eq!((all.exact(), all.per_char()), (1.0, 1.0));
    predicted[2] = 9; // the first answer's second character
    predicted[9] = 9; // not an answer: does not count
    let a = Accuracy::of(&targets, &predicted, 6);
    assert_eq!(
        (a.answers, a.right_answers, a.chars, a.right_chars),
        (3, 2, 6, 5)
    );
    let mut sum = a;
    sum.add(all);
    assert_eq!((sum.right_answers, sum.answers), (5, 6));
    // a run reaching the row's end is cut there
    assert_eq!(answers(&[ig, 1, 1, 2, ig, ig], 3), [1..3, 3..4]);
    assert_eq!(Accuracy::default().exact(), 0.0);
}

#[test]
fn the_tokenizer_reads_every_task_as_its_ids() {
    let mut rng = SplitMix64(2);
    let modadd = |p| task("modadd", &[("p", p)]);
    let every = TASKS.iter().map(|i| task(i.name, &[]));
    for t in every.chain([modadd(7), modadd(113)]) {
        let tok = t.tokenizer().unwrap();
        assert_eq!(tok.vocab_size(), t.vocab());
        for _ in 0..20 {
            let e = t.example(&mut rng);
            let ids = [&e.prompt[..], &e.answer, &[END]].concat();
            assert_eq!(tok.encode(&t.text(&ids)).unwrap(), ids, "{t:?}");
            assert_eq!(tok.decode(&ids).unwrap(), t.text(&ids));
        }
        let again = Tokenizer::from_json(&tok.to_json().unwrap()).unwrap();
        assert_eq!(again.fingerprint(), tok.fingerprint());
    }
    assert_eq!(modadd(23).vocab(), ALPHABET.len() as u32 + 23);
}
