// A CommonJS program that runs rank.cjs on two thread ranks and prints what they returned.
const { spawnThreads } = require('../../dist/index.js');

spawnThreads(require.resolve('./rank.cjs'), { worldSize: 2 }).then((results) => {
  console.log(JSON.stringify(results));
});
