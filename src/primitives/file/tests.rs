#[test]
fn probe_range() {
    let src = "line one\n{{ server.name }}\n{% for x in items %}{{ x.a }}{{ loop.index }}{% endfor %}{{ port }} {{ host }} {{ range(3) }} {{ d['k'] }}\n";
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    let t = env.template_from_named_str("x", src).unwrap();
    let vars = minijinja::Value::from_iter([("server", minijinja::Value::from_iter([("n", 1)])), ("port", minijinja::Value::from(1))]);
    let e = t.render(&vars).unwrap_err();
    eprintln!("{:?} {:?} {:?}", e.line(), e.detail(), e.to_string());
    let mut u: Vec<_> = t.undeclared_variables(true).into_iter().collect(); u.sort();
    eprintln!("{u:?}");
    panic!();
}
