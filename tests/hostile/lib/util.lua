-- A module in a folder beside the sandbox runbooks: require("lib.util").
return { answer = 42 }
